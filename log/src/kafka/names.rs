//! Topic names of strata partitions.
//!
//! Kafka topic names are at most 249 characters of `[A-Za-z0-9._-]`. A partition's topic is
//! `<prefix>.<encoding>`: ASCII letters, digits and `-` are kept, `/` becomes `.`, and every other
//! byte is `_` and two lowercase hex digits (`_control` is `_5fcontrol`). The encoding is
//! reversible. A topic name that would be too long keeps a prefix of the encoding and ends with
//! `_h` and a 16-digit hash of the full name (`h` is not a hex digit, so this cannot be mistaken
//! for an escape); its partition name is then read from the key of its records.

use crate::PartitionId;

/// The longest topic name Kafka accepts.
const MAX_TOPIC: usize = 249;

/// The topic that holds `partition` in a log with `prefix`.
pub fn topic_name(prefix: &str, partition: &PartitionId) -> String {
    let mut encoded = String::new();
    for byte in partition.as_str().bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' => encoded.push(byte as char),
            b'/' => encoded.push('.'),
            _ => encoded.push_str(&format!("_{byte:02x}")),
        }
    }
    let whole = format!("{prefix}.{encoded}");
    if whole.len() <= MAX_TOPIC {
        return whole;
    }
    let hash = crate::partition::name_hash(partition.as_str());
    let suffix = format!("_h{hash:016x}");
    let mut keep = MAX_TOPIC.saturating_sub(prefix.len() + 1 + suffix.len());
    // Do not cut an escape in two.
    while keep > 0
        && encoded
            .as_bytes()
            .get(keep.saturating_sub(2)..keep)
            .is_some_and(|t| t.contains(&b'_'))
    {
        keep -= 1;
    }
    format!("{prefix}.{}{suffix}", &encoded[..keep.min(encoded.len())])
}

/// The partition a topic of a log with `prefix` holds; `None` for a topic of another log, and
/// for a shortened name (ending in `_h<hash>`), whose records' keys tell.
pub fn partition_of(prefix: &str, topic: &str) -> Option<PartitionId> {
    let encoded = topic.strip_prefix(prefix)?.strip_prefix('.')?;
    let mut bytes = Vec::with_capacity(encoded.len());
    let mut chars = encoded.bytes();
    while let Some(byte) = chars.next() {
        match byte {
            b'.' => bytes.push(b'/'),
            b'_' => {
                let hex = [chars.next()?, chars.next()?];
                let text = std::str::from_utf8(&hex).ok()?;
                if !text
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
                {
                    return None;
                }
                bytes.push(u8::from_str_radix(text, 16).ok()?);
            }
            other => bytes.push(other),
        }
    }
    PartitionId::new(String::from_utf8(bytes).ok()?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_stay_within_kafka_rules() {
        let names = [
            "_control".to_owned(),
            "acme/shop/_catalog".to_owned(),
            "acme/shop/docs".to_owned(),
            "x/y.z/..%2F ü".to_owned(),
            "a_b/c-d/E9".to_owned(),
        ];
        for name in names {
            let id = PartitionId::new(name.clone()).unwrap();
            let topic = topic_name("strata", &id);
            assert!(topic.len() <= MAX_TOPIC);
            assert!(
                topic
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b)),
                "{topic}"
            );
            assert_eq!(partition_of("strata", &topic), Some(id), "{topic}");
            assert_eq!(partition_of("other", &topic), None);
        }
        assert_eq!(topic_name("s", &PartitionId::control()), "s._5fcontrol");
    }

    #[test]
    fn long_names_are_shortened_distinctly_and_read_from_record_keys() {
        let a = PartitionId::new("l".repeat(1000)).unwrap();
        let b = PartitionId::new(format!("{}m", "l".repeat(999))).unwrap();
        let (ta, tb) = (topic_name("strata", &a), topic_name("strata", &b));
        assert!(ta.len() <= MAX_TOPIC && tb.len() <= MAX_TOPIC);
        assert_ne!(ta, tb);
        assert_eq!(partition_of("strata", &ta), None);
        let escaped = PartitionId::new("ü".repeat(200)).unwrap();
        let topic = topic_name("strata", &escaped);
        assert!(topic.len() <= MAX_TOPIC);
        assert_eq!(partition_of("strata", &topic), None);
    }
}
