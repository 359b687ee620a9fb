//! Bucket iterators, re-expressed from Prometheus' iterator tests.

use super::*;

fn sample(schema: i32, zero: (f64, f64), with_pos: bool, with_neg: bool) -> FloatHistogram {
    let pos_spans: &[(i32, u32)] = &[(0, 4), (1, 0), (3, 3), (3, 0), (2, 0), (5, 3)];
    let neg_spans: &[(i32, u32)] = &[(0, 3), (1, 0), (3, 0), (3, 4), (2, 0), (5, 3)];
    let pos = [100.0, 344.0, 123.0, 55.0, 3.0, 63.0, 2.0, 54.0, 235.0, 33.0];
    let neg = [
        10.0, 34.0, 1230.0, 54.0, 67.0, 63.0, 2.0, 554.0, 235.0, 33.0,
    ];
    exp(
        schema,
        zero,
        405.0,
        1008.4,
        if with_pos { pos_spans } else { &[] },
        if with_pos { &pos } else { &[] },
        if with_neg { neg_spans } else { &[] },
        if with_neg { &neg } else { &[] },
    )
}

#[test]
fn positive_buckets_with_bounds() {
    let x = h("{{schema:0 count:4 offset:-1 buckets:[1 2 0 1]}}");
    let got: Vec<String> = x.positive_buckets().map(|b| b.to_string()).collect();
    assert_eq!(got, vec!["(0.25,0.5]:1", "(0.5,1]:2", "(1,2]:0", "(2,4]:1"]);
    let indices: Vec<i32> = x.positive_buckets().map(|b| b.index).collect();
    assert_eq!(indices, vec![-1, 0, 1, 2]);
}

#[test]
fn negative_buckets_with_bounds() {
    let x = h("{{schema:0 count:2 n_buckets:[1 2]}}");
    let got: Vec<String> = x.negative_buckets().map(|b| b.to_string()).collect();
    assert_eq!(got, vec!["[-1,-0.5):1", "[-2,-1):2"]);
}

#[test]
fn custom_buckets_with_bounds() {
    let x = h("{{schema:-53 count:6 custom_values:[5 10] buckets:[1 2 3]}}");
    let got: Vec<String> = x.positive_buckets().map(|b| b.to_string()).collect();
    assert_eq!(got, vec!["[-Inf,5]:1", "(5,10]:2", "(10,+Inf]:3"]);
    assert_eq!(x.all_buckets().count(), 3);
    let single = h("{{schema:-53 count:6 buckets:[6]}}");
    let b = single.positive_buckets().next().unwrap();
    assert_eq!((b.lower, b.upper), (f64::NEG_INFINITY, f64::INFINITY));
}

#[test]
fn reverse_iterators_reverse() {
    let x = sample(1, (0.001, 102.0), true, true);
    let mut forward: Vec<Bucket> = x.positive_buckets().collect();
    forward.reverse();
    assert!(!forward.is_empty());
    assert_eq!(x.positive_buckets_reverse().collect::<Vec<_>>(), forward);
    let mut forward: Vec<Bucket> = x.negative_buckets().collect();
    forward.reverse();
    assert_eq!(x.negative_buckets_reverse().collect::<Vec<_>>(), forward);
    // Zero-length spans only move the offset.
    let uppers: Vec<i32> = x.positive_buckets().map(|b| b.index).collect();
    assert_eq!(uppers, vec![0, 1, 2, 3, 8, 9, 10, 21, 22, 23]);
}

#[test]
fn all_buckets_in_order_with_zero_bucket_cut() {
    let cases = [
        (sample(1, (0.001, 102.0), true, true), true, true, true),
        (sample(1, (0.001, 102.0), false, true), true, true, false),
        (sample(1, (0.001, 102.0), true, false), false, true, true),
        (sample(1, (0.001, 102.0), false, false), false, true, false),
        (sample(1, (0.001, 0.0), true, true), true, false, true),
        (sample(0, (0.5, 42.0), true, true), true, true, true),
        (sample(0, (0.6, 42.0), true, true), true, true, true),
    ];
    for (x, neg, zero, pos) in cases {
        let zt = x.zero_threshold;
        let mut want: Vec<Bucket> = Vec::new();
        if neg {
            for mut b in x.negative_buckets_reverse() {
                if zero && b.upper > -zt {
                    b.upper = -zt;
                }
                want.push(b);
            }
        }
        if zero {
            want.push(x.zero_bucket());
        }
        if pos {
            for mut b in x.positive_buckets() {
                if zero && b.lower < zt {
                    b.lower = zt;
                }
                want.push(b);
            }
        }
        assert_eq!(x.all_buckets().collect::<Vec<_>>(), want);
        want.reverse();
        assert_eq!(x.all_buckets_reverse().collect::<Vec<_>>(), want);
    }
}

#[test]
fn side_buckets_merged_to_a_coarser_schema() {
    let x = exp(
        1,
        (0.0, 0.0),
        405.0,
        1008.4,
        &[(0, 4), (1, 3), (2, 3)],
        &[100.0, 344.0, 123.0, 55.0, 3.0, 63.0, 2.0, 54.0, 235.0, 33.0],
        &[],
        &[],
    );
    let merged: Vec<(i32, f64)> = x
        .side_buckets(true, -1)
        .map(|b| (b.index, b.count))
        .collect();
    // Schema 1 indices 0..=3, 5..=7, 10..=12 into the schema -1 buckets 0, 1..=4, 5..=8, 9..=12.
    assert_eq!(
        merged,
        vec![
            (0, 100.0),
            (1, 344.0 + 123.0 + 55.0),
            (2, 3.0 + 63.0 + 2.0),
            (3, 54.0 + 235.0 + 33.0)
        ]
    );
    let uppers: Vec<f64> = x.side_buckets(true, -1).map(|b| b.upper).collect();
    assert_eq!(uppers, vec![1.0, 4.0, 16.0, 64.0]);
}

#[test]
fn inconsistent_spans_are_read_as_far_as_they_go() {
    let mut x = h("{{count:3 buckets:[1 2 3]}}");
    x.positive_spans = spans(&[(0, 5)]);
    assert_eq!(x.positive_buckets().count(), 3);
    x.positive_spans = spans(&[(0, 1)]);
    assert_eq!(x.positive_buckets().count(), 1);
}
