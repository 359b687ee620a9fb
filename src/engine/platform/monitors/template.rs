//! Mustache templates for the subject and message of a monitor's alerts: [`check`] reads a
//! template when a monitor is saved, [`render`] fills it in when a trigger fires.
//!
//! This module owns the whole template language: parsing, the context lookup and rendering. It
//! passes the required modules of the mustache specification (comments, delimiters,
//! interpolation, inverted sections, partials and sections). The optional modules (lambdas,
//! dynamic names, inheritance) are not supported: `{{>*name}}` names a partial called `*name`.
//!
//! Partials come from an in-memory map, never from files; a partial missing from the map renders
//! as nothing, as the specification says. A standalone partial tag indents every line of its
//! partial.
//!
//! The context is read as OpenSearch Alerting users write it:
//! - `ctx` names the root context, so `{{ctx.monitor.name}}` and `{{monitor.name}}` are the same
//!   value, unless the context itself has a `ctx` key;
//! - a numeric segment indexes an array: `{{ctx.results.0.hits.total.value}}`;
//! - a section over an array repeats once per item;
//! - numbers render as JSON writes them (`1`, `2.5`); a float with an integral value renders
//!   without `.0` (`2.0` renders as `2`);
//! - an object or an array interpolated directly renders as compact JSON text, HTML-escaped by
//!   `{{x}}` like any other value;
//! - `null` and missing names render as nothing. `false`, `null`, `""`, `[]` and missing names are
//!   falsey in sections.
//!
//! Everything is bounded: templates and partials of at most [`MAX_TEMPLATE_BYTES`], sections
//! nested at most [`MAX_SECTION_DEPTH`] deep in one template, partials nested at most
//! [`MAX_PARTIAL_DEPTH`] deep and at most [`MAX_NESTING`] sections and partials deep in all, at
//! most [`MAX_OUTPUT_BYTES`] of output and [`MAX_STEPS`] steps of rendering.

use std::collections::{BTreeMap, HashMap};
use std::mem;
use std::rc::Rc;

use serde_json::{Number, Value};

/// The largest template or partial, in bytes.
pub const MAX_TEMPLATE_BYTES: usize = 64 * 1024;
/// How deep partials may include partials, so a recursive partial ends.
pub const MAX_PARTIAL_DEPTH: usize = 32;
/// How deep sections may nest in one template or partial.
pub const MAX_SECTION_DEPTH: usize = 64;
/// How deep sections and partials may nest while rendering, so rendering fits in a thread's stack.
pub const MAX_NESTING: usize = 128;
/// The longest rendered text, in bytes.
pub const MAX_OUTPUT_BYTES: usize = 1024 * 1024;
/// The most tags, texts and section items one rendering may go through.
pub const MAX_STEPS: usize = 1_000_000;

/// A template that cannot be read or rendered, and why, in lowercase words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct TemplateError(String);

impl TemplateError {
    fn new(reason: impl Into<String>) -> Self {
        Self(reason.into())
    }
}

/// Checks that `source` parses, and so does every partial it names, directly or through other
/// partials. A named partial missing from `partials` is not an error: it renders as nothing.
pub fn check(source: &str, partials: &BTreeMap<String, String>) -> Result<(), TemplateError> {
    load(source, partials).map(|_| ())
}

/// Renders `source` with `context` as the root context, looking partials up in `partials`.
/// The template and its partials are checked first, as [`check`] does.
pub fn render(
    source: &str,
    partials: &BTreeMap<String, String>,
    context: &Value,
) -> Result<String, TemplateError> {
    let (nodes, parsed) = load(source, partials)?;
    let mut renderer = Renderer {
        partials,
        parsed,
        out: String::new(),
        steps: 0,
        partial_depth: 0,
        nesting: 0,
    };
    renderer.nodes(&nodes, &mut vec![context])?;
    Ok(renderer.out)
}

/// A parsed template: texts, tags and sections holding their content.
#[derive(Debug)]
enum Node {
    Text(String),
    /// `{{name}}` (escaped) or `{{{name}}}` and `{{&name}}`. An empty path is `{{.}}`.
    Value {
        path: Vec<String>,
        escape: bool,
    },
    Section {
        path: Vec<String>,
        inverted: bool,
        children: Vec<Node>,
    },
    /// `{{>name}}`, with the indentation of a standalone tag.
    Partial {
        name: String,
        indent: String,
    },
}

/// Partials parsed so far, by name and indentation.
type Parsed = HashMap<(String, String), Rc<[Node]>>;

/// Parses the template and the partials it reaches.
fn load(
    source: &str,
    partials: &BTreeMap<String, String>,
) -> Result<(Vec<Node>, Parsed), TemplateError> {
    check_size("template", source)?;
    let (nodes, mut pending) = parse(source)?;
    let mut parsed = Parsed::new();
    while let Some(name) = pending.pop() {
        let key = (name, String::new());
        if parsed.contains_key(&key) {
            continue;
        }
        if let Some(partial) = partials.get(&key.0) {
            let (nodes, names) = parse_partial(&key.0, partial, "")?;
            pending.extend(names);
            parsed.insert(key, nodes.into());
        }
    }
    Ok((nodes, parsed))
}

fn check_size(what: &str, source: &str) -> Result<(), TemplateError> {
    if source.len() > MAX_TEMPLATE_BYTES {
        return Err(TemplateError::new(format!(
            "{what} is {} bytes, over the limit of {MAX_TEMPLATE_BYTES} bytes",
            source.len()
        )));
    }
    Ok(())
}

/// Parses a partial, each of its lines indented by `indent` first.
fn parse_partial(
    name: &str,
    source: &str,
    indent: &str,
) -> Result<(Vec<Node>, Vec<String>), TemplateError> {
    let what = format!("partial {name:?}");
    check_size(&what, source)?;
    parse(&indent_lines(source, indent))
        .map_err(|error| TemplateError::new(format!("{what}: {error}")))
}

/// `source` with `indent` before every line that is not empty.
fn indent_lines(source: &str, indent: &str) -> String {
    if indent.is_empty() {
        return source.to_owned();
    }
    let mut out = String::with_capacity(source.len());
    for line in source.split_inclusive('\n') {
        if line != "\n" && line != "\r\n" {
            out.push_str(indent);
        }
        out.push_str(line);
    }
    out
}

/// What a tag does, from the character after its opening delimiter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Escaped,
    Unescaped,
    Section,
    Inverted,
    Close,
    Partial,
    Comment,
    Delimiters,
}

impl Kind {
    fn from_sigil(byte: u8) -> Option<Kind> {
        match byte {
            b'&' => Some(Kind::Unescaped),
            b'#' => Some(Kind::Section),
            b'^' => Some(Kind::Inverted),
            b'/' => Some(Kind::Close),
            b'>' => Some(Kind::Partial),
            b'!' => Some(Kind::Comment),
            _ => None,
        }
    }

    /// Whether the tag removes its whole line when it stands alone on it.
    fn can_stand_alone(self) -> bool {
        !matches!(self, Kind::Escaped | Kind::Unescaped)
    }
}

/// A tag as written: `source[start..end]`, and its trimmed content after the sigil.
struct Tag<'s> {
    kind: Kind,
    content: &'s str,
    start: usize,
    end: usize,
}

/// A section whose closing tag has not been read yet.
struct Open {
    name: String,
    path: Vec<String>,
    inverted: bool,
    tag: String,
    start: usize,
    siblings: Vec<Node>,
}

struct Parser<'s> {
    source: &'s str,
    pos: usize,
    open: String,
    close: String,
    nodes: Vec<Node>,
    sections: Vec<Open>,
    partials: Vec<String>,
}

/// Parses a template into nodes, and the names of the partials it includes.
fn parse(source: &str) -> Result<(Vec<Node>, Vec<String>), TemplateError> {
    let mut parser = Parser {
        source,
        pos: 0,
        open: "{{".to_owned(),
        close: "}}".to_owned(),
        nodes: Vec::new(),
        sections: Vec::new(),
        partials: Vec::new(),
    };
    while let Some(offset) = source[parser.pos..].find(&parser.open) {
        parser.tag(parser.pos + offset)?;
    }
    parser.finish()
}

impl<'s> Parser<'s> {
    /// Reads the tag at `start` and the text before it.
    fn tag(&mut self, start: usize) -> Result<(), TemplateError> {
        let tag = self.read_tag(start)?;
        let standalone = if tag.kind.can_stand_alone() {
            self.standalone(start, tag.end)
        } else {
            None
        };
        let (text_end, next) = standalone.unwrap_or((start, tag.end));
        self.text(text_end);
        let indent = &self.source[text_end..start];
        self.apply(&tag, indent)?;
        self.pos = next;
        Ok(())
    }

    fn read_tag(&self, start: usize) -> Result<Tag<'s>, TemplateError> {
        let inner = start + self.open.len();
        // `{{{name}}}` ends at `}}}` and `{{=<% %>=}}` at `=}}`, the others at `}}`.
        let (kind, sigil, end_mark) = match self.source.as_bytes().get(inner) {
            Some(b'{') => (Kind::Unescaped, 1, "}"),
            Some(b'=') => (Kind::Delimiters, 1, "="),
            Some(&byte) => {
                Kind::from_sigil(byte).map_or((Kind::Escaped, 0, ""), |kind| (kind, 1, ""))
            }
            None => (Kind::Escaped, 0, ""),
        };
        let closer = format!("{end_mark}{}", self.close);
        let body = inner + sigil;
        let Some(length) = self.source[body..].find(&closer) else {
            let tag: String = self.source[start..].chars().take(40).collect();
            return Err(self.error(start, format!("unclosed tag {tag}")));
        };
        Ok(Tag {
            kind,
            content: self.source[body..body + length].trim(),
            start,
            end: body + length + closer.len(),
        })
    }

    /// Where the line of a standalone tag starts and where the next line starts, or `None` if
    /// something other than spaces and tabs shares the tag's line.
    fn standalone(&self, start: usize, end: usize) -> Option<(usize, usize)> {
        let line_start = self.source[..start].rfind('\n').map_or(0, |i| i + 1);
        if line_start < self.pos || !self.source[line_start..start].bytes().all(is_blank) {
            return None;
        }
        let rest = &self.source[end..];
        let blanks = rest.bytes().take_while(|byte| is_blank(*byte)).count();
        let after = &rest[blanks..];
        let newline = if after.is_empty() {
            0
        } else if after.starts_with("\r\n") {
            2
        } else if after.starts_with('\n') {
            1
        } else {
            return None;
        };
        Some((line_start, end + blanks + newline))
    }

    fn text(&mut self, end: usize) {
        if self.pos < end {
            self.nodes
                .push(Node::Text(self.source[self.pos..end].to_owned()));
        }
    }

    fn apply(&mut self, tag: &Tag<'s>, indent: &str) -> Result<(), TemplateError> {
        match tag.kind {
            Kind::Comment => {}
            Kind::Escaped | Kind::Unescaped => {
                let path = self.path(tag)?;
                let escape = tag.kind == Kind::Escaped;
                self.nodes.push(Node::Value { path, escape });
            }
            Kind::Section | Kind::Inverted => self.open_section(tag)?,
            Kind::Close => self.close_section(tag)?,
            Kind::Partial => self.partial(tag, indent)?,
            Kind::Delimiters => self.delimiters(tag)?,
        }
        Ok(())
    }

    fn open_section(&mut self, tag: &Tag<'s>) -> Result<(), TemplateError> {
        if self.sections.len() >= MAX_SECTION_DEPTH {
            let reason = format!("sections nested deeper than {MAX_SECTION_DEPTH}");
            return Err(self.error(tag.start, reason));
        }
        let path = self.path(tag)?;
        self.sections.push(Open {
            name: tag.content.to_owned(),
            path,
            inverted: tag.kind == Kind::Inverted,
            tag: self.written(tag).to_owned(),
            start: tag.start,
            siblings: mem::take(&mut self.nodes),
        });
        Ok(())
    }

    fn close_section(&mut self, tag: &Tag<'s>) -> Result<(), TemplateError> {
        let written = self.written(tag);
        let Some(open) = self.sections.pop() else {
            let reason = format!("closing tag {written} has no open section");
            return Err(self.error(tag.start, reason));
        };
        if open.name != tag.content {
            return Err(TemplateError::new(format!(
                "unclosed section {} on line {} ({written} on line {} does not close it)",
                open.tag,
                line_of(self.source, open.start),
                line_of(self.source, tag.start)
            )));
        }
        let children = mem::replace(&mut self.nodes, open.siblings);
        self.nodes.push(Node::Section {
            path: open.path,
            inverted: open.inverted,
            children,
        });
        Ok(())
    }

    fn partial(&mut self, tag: &Tag<'s>, indent: &str) -> Result<(), TemplateError> {
        let name = self.name(tag)?.to_owned();
        self.partials.push(name.clone());
        self.nodes.push(Node::Partial {
            name,
            indent: indent.to_owned(),
        });
        Ok(())
    }

    /// `{{=<% %>=}}`: the two new delimiters, separated by whitespace.
    fn delimiters(&mut self, tag: &Tag<'s>) -> Result<(), TemplateError> {
        let parts: Vec<&str> = tag.content.split_whitespace().collect();
        let [open, close] = parts[..] else {
            let reason = format!(
                "invalid delimiters {}: expected two delimiters separated by a space",
                self.written(tag)
            );
            return Err(self.error(tag.start, reason));
        };
        self.open = open.to_owned();
        self.close = close.to_owned();
        Ok(())
    }

    fn finish(mut self) -> Result<(Vec<Node>, Vec<String>), TemplateError> {
        if let Some(open) = self.sections.last() {
            return Err(self.error(open.start, format!("unclosed section {}", open.tag)));
        }
        self.text(self.source.len());
        Ok((self.nodes, self.partials))
    }

    /// A tag's name: not empty and without whitespace.
    fn name<'t>(&self, tag: &Tag<'t>) -> Result<&'t str, TemplateError> {
        if tag.content.is_empty() {
            let reason = format!("empty tag {}", self.written(tag));
            return Err(self.error(tag.start, reason));
        }
        if tag.content.contains(char::is_whitespace) {
            let reason = format!("invalid name in {}", self.written(tag));
            return Err(self.error(tag.start, reason));
        }
        Ok(tag.content)
    }

    /// A tag's dotted name split on dots; `.` is the empty path, the current context.
    fn path(&self, tag: &Tag<'s>) -> Result<Vec<String>, TemplateError> {
        let name = self.name(tag)?;
        if name == "." {
            return Ok(Vec::new());
        }
        let path: Vec<String> = name.split('.').map(str::to_owned).collect();
        if path.iter().any(String::is_empty) {
            let reason = format!("invalid name in {}", self.written(tag));
            return Err(self.error(tag.start, reason));
        }
        Ok(path)
    }

    fn written(&self, tag: &Tag<'s>) -> &'s str {
        &self.source[tag.start..tag.end]
    }

    fn error(&self, at: usize, reason: String) -> TemplateError {
        TemplateError::new(format!("{reason} on line {}", line_of(self.source, at)))
    }
}

fn is_blank(byte: u8) -> bool {
    byte == b' ' || byte == b'\t'
}

fn line_of(source: &str, at: usize) -> usize {
    source[..at].matches('\n').count() + 1
}

struct Renderer<'a> {
    partials: &'a BTreeMap<String, String>,
    parsed: Parsed,
    out: String,
    steps: usize,
    partial_depth: usize,
    nesting: usize,
}

impl Renderer<'_> {
    fn nodes(&mut self, nodes: &[Node], stack: &mut Vec<&Value>) -> Result<(), TemplateError> {
        nodes.iter().try_for_each(|node| self.node(node, stack))
    }

    fn node(&mut self, node: &Node, stack: &mut Vec<&Value>) -> Result<(), TemplateError> {
        self.step()?;
        match node {
            Node::Text(text) => self.write(text),
            Node::Value { path, escape } => match lookup(stack, path) {
                Some(value) => self.value(value, *escape),
                None => Ok(()),
            },
            Node::Section {
                path,
                inverted: false,
                children,
            } => self.section(path, children, stack),
            Node::Section {
                path,
                inverted: true,
                children,
            } => match lookup(stack, path).is_some_and(truthy) {
                true => Ok(()),
                false => self.nested(children, stack),
            },
            Node::Partial { name, indent } => self.partial(name, indent, stack),
        }
    }

    /// Renders `children` once per item of an array, or once with a truthy value pushed.
    fn section(
        &mut self,
        path: &[String],
        children: &[Node],
        stack: &mut Vec<&Value>,
    ) -> Result<(), TemplateError> {
        match lookup(stack, path) {
            Some(Value::Array(items)) => items
                .iter()
                .try_for_each(|item| self.within(item, children, stack)),
            Some(value) if truthy(value) => self.within(value, children, stack),
            _ => Ok(()),
        }
    }

    fn within<'v>(
        &mut self,
        value: &'v Value,
        children: &[Node],
        stack: &mut Vec<&'v Value>,
    ) -> Result<(), TemplateError> {
        self.step()?;
        stack.push(value);
        let rendered = self.nested(children, stack);
        stack.pop();
        rendered
    }

    /// Renders the content of a section or a partial, one level deeper.
    fn nested(&mut self, nodes: &[Node], stack: &mut Vec<&Value>) -> Result<(), TemplateError> {
        if self.nesting >= MAX_NESTING {
            return Err(TemplateError::new(format!(
                "sections and partials nested deeper than {MAX_NESTING}"
            )));
        }
        self.nesting += 1;
        let rendered = self.nodes(nodes, stack);
        self.nesting -= 1;
        rendered
    }

    fn partial(
        &mut self,
        name: &str,
        indent: &str,
        stack: &mut Vec<&Value>,
    ) -> Result<(), TemplateError> {
        let Some(nodes) = self.partial_nodes(name, indent)? else {
            return Ok(());
        };
        if self.partial_depth >= MAX_PARTIAL_DEPTH {
            return Err(TemplateError::new(format!(
                "partial {name:?} nested deeper than {MAX_PARTIAL_DEPTH} partials"
            )));
        }
        self.partial_depth += 1;
        let rendered = self.nested(&nodes, stack);
        self.partial_depth -= 1;
        rendered
    }

    /// The partial called `name` parsed with `indent`, or `None` if there is no such partial.
    fn partial_nodes(
        &mut self,
        name: &str,
        indent: &str,
    ) -> Result<Option<Rc<[Node]>>, TemplateError> {
        let key = (name.to_owned(), indent.to_owned());
        if let Some(nodes) = self.parsed.get(&key) {
            return Ok(Some(Rc::clone(nodes)));
        }
        let Some(source) = self.partials.get(name) else {
            return Ok(None);
        };
        let nodes: Rc<[Node]> = parse_partial(name, source, indent)?.0.into();
        self.parsed.insert(key, Rc::clone(&nodes));
        Ok(Some(nodes))
    }

    fn value(&mut self, value: &Value, escape: bool) -> Result<(), TemplateError> {
        let text = match value {
            Value::Null => return Ok(()),
            Value::String(text) => return self.text(text, escape),
            Value::Number(number) => number_text(number),
            Value::Bool(flag) => flag.to_string(),
            Value::Array(_) | Value::Object(_) => value.to_string(),
        };
        self.text(&text, escape)
    }

    fn text(&mut self, text: &str, escape: bool) -> Result<(), TemplateError> {
        if !escape {
            return self.write(text);
        }
        for c in text.chars() {
            match c {
                '&' => self.out.push_str("&amp;"),
                '<' => self.out.push_str("&lt;"),
                '>' => self.out.push_str("&gt;"),
                '"' => self.out.push_str("&quot;"),
                '\'' => self.out.push_str("&#39;"),
                c => self.out.push(c),
            }
        }
        self.check_output()
    }

    fn write(&mut self, text: &str) -> Result<(), TemplateError> {
        self.out.push_str(text);
        self.check_output()
    }

    fn check_output(&self) -> Result<(), TemplateError> {
        if self.out.len() > MAX_OUTPUT_BYTES {
            return Err(TemplateError::new(format!(
                "rendered text over the limit of {MAX_OUTPUT_BYTES} bytes"
            )));
        }
        Ok(())
    }

    fn step(&mut self) -> Result<(), TemplateError> {
        self.steps += 1;
        if self.steps > MAX_STEPS {
            return Err(TemplateError::new(format!(
                "rendering took over {MAX_STEPS} steps"
            )));
        }
        Ok(())
    }
}

/// The value a path names: its first segment is looked up from the innermost context out (`ctx`
/// is the root context if no context has it), the others in turn within the value found.
fn lookup<'v>(stack: &[&'v Value], path: &[String]) -> Option<&'v Value> {
    let Some((first, rest)) = path.split_first() else {
        return stack.last().copied();
    };
    let found = stack.iter().rev().find_map(|value| child(value, first));
    let start = match (found, first.as_str()) {
        (None, "ctx") => stack.first().copied(),
        (found, _) => found,
    };
    rest.iter().try_fold(start?, |value, key| child(value, key))
}

/// A key of an object, or an item of an array when the key is a number.
fn child<'v>(value: &'v Value, key: &str) -> Option<&'v Value> {
    match value {
        Value::Object(map) => map.get(key),
        Value::Array(items) if !key.is_empty() && key.bytes().all(|b| b.is_ascii_digit()) => {
            items.get(key.parse::<usize>().ok()?)
        }
        _ => None,
    }
}

fn truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(flag) => *flag,
        Value::String(text) => !text.is_empty(),
        Value::Array(items) => !items.is_empty(),
        Value::Number(_) | Value::Object(_) => true,
    }
}

/// A number as JSON writes it, a float with an integral value without `.0`.
fn number_text(number: &Number) -> String {
    const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53: every integer below it is exact
    match number.as_f64() {
        Some(float) if number.is_f64() && float.fract() == 0.0 && float.abs() < EXACT => {
            format!("{}", float as i64)
        }
        _ => number.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn no_partials() -> BTreeMap<String, String> {
        BTreeMap::new()
    }

    fn render_with(source: &str, context: &Value) -> String {
        render(source, &no_partials(), context).unwrap()
    }

    fn alert() -> Value {
        json!({
            "monitor": {"name": "cpu high"},
            "trigger": {"name": "over 90", "severity": "1"},
            "results": [
                {"hits": {"total": {"value": 3}, "hits": [
                    {"_source": {"status": "ok"}},
                    {"_source": {"status": "down"}}
                ]}},
                {"hits": {"total": {"value": 0}, "hits": []}}
            ],
            "periodStart": "2025-01-01T00:00:00Z",
            "timestamp": 1735689600000_u64
        })
    }

    #[test]
    fn ctx_names_the_root_context() {
        let out = render_with("{{ctx.monitor.name}}|{{monitor.name}}", &alert());
        assert_eq!(out, "cpu high|cpu high");
        let out = render_with("{{#results}}{{ctx.trigger.name}};{{/results}}", &alert());
        assert_eq!(out, "over 90;over 90;");
        let out = render_with("{{#ctx.monitor}}{{name}}{{/ctx.monitor}}", &alert());
        assert_eq!(out, "cpu high");
    }

    #[test]
    fn a_ctx_key_in_the_context_wins() {
        let out = render_with("{{ctx.a}}", &json!({"ctx": {"a": "own"}, "a": "root"}));
        assert_eq!(out, "own");
    }

    #[test]
    fn numeric_segments_index_arrays() {
        let out = render_with("{{ctx.results.0.hits.total.value}}", &alert());
        assert_eq!(out, "3");
        let out = render_with("{{results.0.hits.hits.1._source.status}}", &alert());
        assert_eq!(out, "down");
        let out = render_with(
            "[{{results.7.hits}}][{{results.-1}}][{{results.+0}}]",
            &alert(),
        );
        assert_eq!(out, "[][][]");
    }

    #[test]
    fn sections_over_arrays_repeat() {
        let source = "{{#results}}<{{hits.total.value}}>{{/results}}";
        assert_eq!(render_with(source, &alert()), "<3><0>");
        let source = "{{#ctx.results.0.hits.hits}}{{_source.status}},{{/ctx.results.0.hits.hits}}";
        assert_eq!(render_with(source, &alert()), "ok,down,");
        let source = "{{^results.1.hits.hits}}none{{/results.1.hits.hits}}";
        assert_eq!(render_with(source, &alert()), "none");
    }

    #[test]
    fn double_braces_escape_html_and_the_others_do_not() {
        let context = json!({"x": "<a href=\"/\">Tom & Jerry's</a>"});
        let escaped = "&lt;a href=&quot;/&quot;&gt;Tom &amp; Jerry&#39;s&lt;/a&gt;";
        assert_eq!(render_with("{{x}}", &context), escaped);
        assert_eq!(
            render_with("{{{x}}}", &context),
            "<a href=\"/\">Tom & Jerry's</a>"
        );
        assert_eq!(
            render_with("{{&x}}", &context),
            "<a href=\"/\">Tom & Jerry's</a>"
        );
    }

    #[test]
    fn numbers_render_as_json_writes_them() {
        let context =
            json!({"i": 1, "f": 2.5, "whole": 2.0, "neg": -3, "big": u64::MAX, "tiny": 1e-7});
        let out = render_with("{{i}} {{f}} {{whole}} {{neg}} {{big}} {{tiny}}", &context);
        assert_eq!(out, "1 2.5 2 -3 18446744073709551615 1e-7");
        assert_eq!(render_with("{{timestamp}}", &alert()), "1735689600000");
    }

    #[test]
    fn objects_and_arrays_render_as_compact_json() {
        let context = json!({"o": {"a": [1, "b"]}, "l": [1, 2]});
        assert_eq!(
            render_with("{{{o}}} {{{l}}}", &context),
            r#"{"a":[1,"b"]} [1,2]"#
        );
        assert_eq!(
            render_with("{{o}}", &context),
            "{&quot;a&quot;:[1,&quot;b&quot;]}"
        );
    }

    #[test]
    fn null_and_missing_render_nothing() {
        let context = json!({"n": null, "t": true});
        assert_eq!(
            render_with("[{{n}}][{{missing}}][{{t}}][{{n.x}}]", &context),
            "[][][true][]"
        );
    }

    #[test]
    fn falsey_values_skip_sections() {
        let context = json!({"f": false, "n": null, "s": "", "l": [], "z": 0, "o": {}});
        let out = render_with(
            "{{#f}}f{{/f}}{{#n}}n{{/n}}{{#s}}s{{/s}}{{#l}}l{{/l}}{{#z}}z{{/z}}{{#o}}o{{/o}}",
            &context,
        );
        assert_eq!(out, "zo");
        let out = render_with(
            "{{^f}}f{{/f}}{{^n}}n{{/n}}{{^s}}s{{/s}}{{^l}}l{{/l}}{{^z}}z{{/z}}",
            &context,
        );
        assert_eq!(out, "fnsl");
    }

    #[test]
    fn check_names_the_problem() {
        let error = |source: &str| check(source, &no_partials()).unwrap_err().to_string();
        assert_eq!(error("x\n{{#a}}b"), "unclosed section {{#a}} on line 2");
        assert_eq!(
            error("{{#a}}{{/b}}"),
            "unclosed section {{#a}} on line 1 ({{/b}} on line 1 does not close it)"
        );
        assert_eq!(
            error("{{/a}}"),
            "closing tag {{/a}} has no open section on line 1"
        );
        assert_eq!(error("hi {{name"), "unclosed tag {{name on line 1");
        assert_eq!(error("{{ }}"), "empty tag {{ }} on line 1");
        assert_eq!(error("{{a..b}}"), "invalid name in {{a..b}} on line 1");
        assert_eq!(
            error("{{=<%=}}"),
            "invalid delimiters {{=<%=}}: expected two delimiters separated by a space on line 1"
        );
        assert!(check("{{#a}}{{b.c}}{{/a}}{{=<% %>=}}<%x%>", &no_partials()).is_ok());
    }

    #[test]
    fn check_reads_the_partials_named() {
        let partials = BTreeMap::from([
            ("outer".to_owned(), "{{>inner}}".to_owned()),
            ("inner".to_owned(), "{{#open}}".to_owned()),
            ("unused".to_owned(), "{{#also broken}}".to_owned()),
        ]);
        let error = check("{{>outer}}", &partials).unwrap_err().to_string();
        assert_eq!(
            error,
            "partial \"inner\": unclosed section {{#open}} on line 1"
        );
        assert!(check("{{>missing}}", &partials).is_ok());
        assert!(render("{{>outer}}", &partials, &json!({})).is_err());
    }

    #[test]
    fn an_unknown_partial_renders_nothing() {
        let partials = BTreeMap::from([("known".to_owned(), "K".to_owned())]);
        let out = render("[{{>unknown}}][{{>known}}]", &partials, &json!({})).unwrap();
        assert_eq!(out, "[][K]");
    }

    #[test]
    fn standalone_partials_indent_their_lines() {
        let partials = BTreeMap::from([("p".to_owned(), "a\n{{{v}}}\n\nb\n".to_owned())]);
        let out = render("x\n  {{>p}}\ny", &partials, &json!({"v": "1\n2"})).unwrap();
        assert_eq!(out, "x\n  a\n  1\n2\n\n  b\ny");
    }

    #[test]
    fn templates_over_the_limit_are_rejected() {
        let big = "x".repeat(MAX_TEMPLATE_BYTES + 1);
        let error = check(&big, &no_partials()).unwrap_err().to_string();
        assert_eq!(
            error,
            "template is 65537 bytes, over the limit of 65536 bytes"
        );
        assert!(render(&big, &no_partials(), &json!({})).is_err());
        let partials = BTreeMap::from([("p".to_owned(), big)]);
        let error = check("{{>p}}", &partials).unwrap_err().to_string();
        assert_eq!(
            error,
            "partial \"p\" is 65537 bytes, over the limit of 65536 bytes"
        );
    }

    #[test]
    fn recursive_partials_stop_on_self_similar_data() {
        // `child` is found again in the outer context at every level, so this never ends.
        let partials = BTreeMap::from([(
            "node".to_owned(),
            "{{#child}}.{{>node}}{{/child}}".to_owned(),
        )]);
        let error = render("{{>node}}", &partials, &json!({"child": {"x": 1}})).unwrap_err();
        assert_eq!(
            error.to_string(),
            "partial \"node\" nested deeper than 32 partials"
        );
    }

    #[test]
    fn rendering_work_is_bounded() {
        // 2^25 partial calls that render nothing: over the step limit, under the depth limit.
        let mut data = json!({"a": false});
        for _ in 0..25 {
            data = json!({ "a": data });
        }
        let partials = BTreeMap::from([("p".to_owned(), "{{#a}}{{>p}}{{>p}}{{/a}}".to_owned())]);
        let error = render("{{>p}}", &partials, &data).unwrap_err();
        assert_eq!(error.to_string(), "rendering took over 1000000 steps");

        let context = json!({"x": "y".repeat(600 * 1024), "l": [1, 2]});
        let error = render("{{#l}}{{x}}{{/l}}", &no_partials(), &context).unwrap_err();
        assert_eq!(
            error.to_string(),
            "rendered text over the limit of 1048576 bytes"
        );
    }

    #[test]
    fn sections_nest_at_most_the_limit() {
        let nested = |depth: usize| format!("{}{}", "{{#a}}".repeat(depth), "{{/a}}".repeat(depth));
        assert!(check(&nested(MAX_SECTION_DEPTH), &no_partials()).is_ok());
        let error = check(&nested(MAX_SECTION_DEPTH + 1), &no_partials()).unwrap_err();
        assert_eq!(
            error.to_string(),
            "sections nested deeper than 64 on line 1"
        );
    }

    #[test]
    fn nesting_is_bounded_while_rendering() {
        // 32 partials each 64 sections deep would recurse 2048 levels deep.
        let body = format!("{}{{{{>p}}}}{}", "{{#a}}".repeat(64), "{{/a}}".repeat(64));
        let partials = BTreeMap::from([("p".to_owned(), body)]);
        let error = render("{{>p}}", &partials, &json!({"a": true})).unwrap_err();
        assert_eq!(
            error.to_string(),
            "sections and partials nested deeper than 128"
        );
        let inverted = format!("{}{{{{>p}}}}{}", "{{^a}}".repeat(64), "{{/a}}".repeat(64));
        let partials = BTreeMap::from([("p".to_owned(), inverted)]);
        let error = render("{{>p}}", &partials, &json!({})).unwrap_err();
        assert_eq!(
            error.to_string(),
            "sections and partials nested deeper than 128"
        );
    }

    #[test]
    fn the_deepest_nesting_allowed_fits_in_a_small_stack() {
        let nested = format!("{}x{}", "{{#a}}".repeat(63), "{{/a}}".repeat(63));
        let partials = BTreeMap::from([("p".to_owned(), nested)]);
        let source = format!("{}{{{{>p}}}}{}", "{{#a}}".repeat(64), "{{/a}}".repeat(64));
        let rendered = std::thread::Builder::new()
            .stack_size(512 * 1024)
            .spawn(move || render(&source, &partials, &json!({"a": true})))
            .unwrap()
            .join()
            .unwrap();
        assert_eq!(rendered.unwrap(), "x");
    }
}
