//! Operators of the syntax tree: aggregations, binary operators with their vector matching,
//! unary signs.

/// An aggregation operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AggregateOp {
    Avg,
    Bottomk,
    Count,
    CountValues,
    Group,
    Limitk,
    LimitRatio,
    Max,
    Min,
    Quantile,
    Stddev,
    Stdvar,
    Sum,
    Topk,
}

impl AggregateOp {
    /// The keyword, as printed.
    pub fn name(self) -> &'static str {
        match self {
            AggregateOp::Avg => "avg",
            AggregateOp::Bottomk => "bottomk",
            AggregateOp::Count => "count",
            AggregateOp::CountValues => "count_values",
            AggregateOp::Group => "group",
            AggregateOp::Limitk => "limitk",
            AggregateOp::LimitRatio => "limit_ratio",
            AggregateOp::Max => "max",
            AggregateOp::Min => "min",
            AggregateOp::Quantile => "quantile",
            AggregateOp::Stddev => "stddev",
            AggregateOp::Stdvar => "stdvar",
            AggregateOp::Sum => "sum",
            AggregateOp::Topk => "topk",
        }
    }

    /// Whether the aggregation takes a parameter before the vector (`topk(3, x)`).
    pub fn takes_param(self) -> bool {
        matches!(
            self,
            AggregateOp::Topk
                | AggregateOp::Bottomk
                | AggregateOp::CountValues
                | AggregateOp::Quantile
                | AggregateOp::Limitk
                | AggregateOp::LimitRatio
        )
    }

    /// Whether Prometheus gates the aggregation behind experimental functions.
    pub fn is_experimental(self) -> bool {
        matches!(self, AggregateOp::Limitk | AggregateOp::LimitRatio)
    }
}

/// A binary operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    Pow,
    Atan2,
    Eql,
    Neq,
    Lss,
    Lte,
    Gtr,
    Gte,
    /// `</`: keeps the part of native histograms below the scalar (trims the upper part).
    TrimUpper,
    /// `>/`: keeps the part of native histograms above the scalar (trims the lower part).
    TrimLower,
    And,
    Or,
    Unless,
}

impl BinaryOp {
    /// The operator as written.
    pub fn name(self) -> &'static str {
        match self {
            BinaryOp::Add => "+",
            BinaryOp::Sub => "-",
            BinaryOp::Mul => "*",
            BinaryOp::Div => "/",
            BinaryOp::Mod => "%",
            BinaryOp::Pow => "^",
            BinaryOp::Atan2 => "atan2",
            BinaryOp::Eql => "==",
            BinaryOp::Neq => "!=",
            BinaryOp::Lss => "<",
            BinaryOp::Lte => "<=",
            BinaryOp::Gtr => ">",
            BinaryOp::Gte => ">=",
            BinaryOp::TrimUpper => "</",
            BinaryOp::TrimLower => ">/",
            BinaryOp::And => "and",
            BinaryOp::Or => "or",
            BinaryOp::Unless => "unless",
        }
    }

    /// `==`, `!=`, `<`, `<=`, `>`, `>=`.
    pub fn is_comparison(self) -> bool {
        matches!(
            self,
            BinaryOp::Eql
                | BinaryOp::Neq
                | BinaryOp::Lss
                | BinaryOp::Lte
                | BinaryOp::Gtr
                | BinaryOp::Gte
        )
    }

    /// `and`, `or`, `unless`.
    pub fn is_set_operator(self) -> bool {
        matches!(self, BinaryOp::And | BinaryOp::Or | BinaryOp::Unless)
    }

    /// Binding strength, 1 (`or`) to 6 (`^`).
    pub fn precedence(self) -> u8 {
        match self {
            BinaryOp::Or => 1,
            BinaryOp::And | BinaryOp::Unless => 2,
            BinaryOp::Eql
            | BinaryOp::Neq
            | BinaryOp::Lss
            | BinaryOp::Lte
            | BinaryOp::Gtr
            | BinaryOp::Gte
            | BinaryOp::TrimUpper
            | BinaryOp::TrimLower => 3,
            BinaryOp::Add | BinaryOp::Sub => 4,
            BinaryOp::Mul | BinaryOp::Div | BinaryOp::Mod | BinaryOp::Atan2 => 5,
            BinaryOp::Pow => 6,
        }
    }

    /// Only `^` is right-associative.
    pub fn is_right_associative(self) -> bool {
        self == BinaryOp::Pow
    }
}

/// How the two sides of a vector/vector operation are matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VectorMatchCardinality {
    OneToOne,
    ManyToOne,
    OneToMany,
    ManyToMany,
}

impl VectorMatchCardinality {
    /// `one-to-one`, `many-to-one`, ...
    pub fn name(self) -> &'static str {
        match self {
            VectorMatchCardinality::OneToOne => "one-to-one",
            VectorMatchCardinality::ManyToOne => "many-to-one",
            VectorMatchCardinality::OneToMany => "one-to-many",
            VectorMatchCardinality::ManyToMany => "many-to-many",
        }
    }
}

/// The values the `fill`, `fill_left` and `fill_right` modifiers give to missing series.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct FillValues {
    /// Value for series missing on the left-hand side.
    pub lhs: Option<f64>,
    /// Value for series missing on the right-hand side.
    pub rhs: Option<f64>,
}

impl FillValues {
    /// Whether any fill modifier was given.
    pub fn is_set(&self) -> bool {
        self.lhs.is_some() || self.rhs.is_some()
    }
}

/// Vector matching of a binary operation between two instant vectors.
#[derive(Debug, Clone, PartialEq)]
pub struct VectorMatching {
    pub card: VectorMatchCardinality,
    /// The `on`/`ignoring` labels.
    pub matching_labels: Vec<String>,
    /// `on` (match on the listed labels) rather than `ignoring`.
    pub on: bool,
    /// The `group_left`/`group_right` labels copied from the "one" side.
    pub include: Vec<String>,
    pub fill: FillValues,
}

impl Default for VectorMatching {
    fn default() -> Self {
        Self {
            card: VectorMatchCardinality::OneToOne,
            matching_labels: Vec::new(),
            on: false,
            include: Vec::new(),
            fill: FillValues::default(),
        }
    }
}

/// A unary operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnaryOp {
    Add,
    Sub,
}
