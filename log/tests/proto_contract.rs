//! The .proto is a contract with every consumer that decodes the log (docs/change-streams.md):
//! its messages only ever gain fields. This test holds the descriptor set this build compiled
//! from log/protos/strata/v1/events.proto against the frozen one committed beside it
//! (events.binpb), with the wire rules of buf's breaking-change check: no message, field or enum
//! value of the frozen set may go (unless its number and name are reserved), and none may change
//! its number, name, type, cardinality or oneof.
//!
//! A field added to the .proto must be frozen in the same change, so that from then on it is
//! held too: the test fails until the frozen set is refreshed with
//!
//! ```sh
//! STRATA_FREEZE_PROTO=1 cargo test -p strata-log --test proto_contract
//! ```
//!
//! which writes the set this build compiled (without source info) over the frozen one, after
//! checking that the change breaks nothing.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;

use prost::Message;
use prost_types::{
    DescriptorProto, EnumDescriptorProto, FieldDescriptorProto, FileDescriptorSet,
    field_descriptor_proto::{Label, Type},
};

const FROZEN_PATH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/protos/strata/v1/events.binpb");

/// What one comparison found: changes that break consumers, and additions not yet frozen.
#[derive(Debug, Default)]
struct Findings {
    breaking: Vec<String>,
    added: Vec<String>,
}

/// Messages and enums of a set by full name (`.strata.v1.Envelope`, nested ones included).
#[derive(Default)]
struct Types<'a> {
    messages: BTreeMap<String, &'a DescriptorProto>,
    enums: BTreeMap<String, &'a EnumDescriptorProto>,
}

impl<'a> Types<'a> {
    fn of(set: &'a FileDescriptorSet) -> Types<'a> {
        let mut types = Types::default();
        for file in &set.file {
            let scope = format!(".{}", file.package());
            for message in &file.message_type {
                types.message(&scope, message);
            }
            for e in &file.enum_type {
                types.enums.insert(format!("{scope}.{}", e.name()), e);
            }
        }
        types
    }

    fn message(&mut self, scope: &str, message: &'a DescriptorProto) {
        let name = format!("{scope}.{}", message.name());
        for nested in &message.nested_type {
            self.message(&name, nested);
        }
        for e in &message.enum_type {
            self.enums.insert(format!("{name}.{}", e.name()), e);
        }
        self.messages.insert(name, message);
    }
}

fn reserved(message: &DescriptorProto, number: i32, name: &str) -> bool {
    let number_reserved = message
        .reserved_range
        .iter()
        .any(|r| (r.start()..r.end()).contains(&number));
    number_reserved && message.reserved_name.iter().any(|n| n == name)
}

/// How a field looks on the wire and in JSON: what may never change.
fn shape(message: &DescriptorProto, field: &FieldDescriptorProto) -> String {
    let oneof = field
        .oneof_index
        .filter(|_| !field.proto3_optional())
        .map(|i| format!(" in oneof {}", message.oneof_decl[i as usize].name()))
        .unwrap_or_default();
    let label = match (field.label(), field.proto3_optional()) {
        (Label::Repeated, _) => "repeated ",
        (_, true) => "optional ",
        _ => "",
    };
    let ty = match field.r#type() {
        Type::Message | Type::Enum | Type::Group => field.type_name().to_owned(),
        other => other
            .as_str_name()
            .trim_start_matches("TYPE_")
            .to_lowercase(),
    };
    format!("{label}{ty} {}{oneof}", field.name())
}

/// The breaking changes from `frozen` to `current`, and what `current` adds.
fn compare(frozen: &FileDescriptorSet, current: &FileDescriptorSet) -> Findings {
    let mut findings = Findings::default();
    let (old, new) = (Types::of(frozen), Types::of(current));
    for file in &frozen.file {
        if !current.file.iter().any(|f| f.name() == file.name()) {
            findings
                .breaking
                .push(format!("file {} was deleted", file.name()));
        }
    }
    for (name, before) in &old.messages {
        let Some(after) = new.messages.get(name) else {
            findings
                .breaking
                .push(format!("message {name} was deleted"));
            continue;
        };
        let fields = |m: &DescriptorProto| -> BTreeMap<i32, FieldDescriptorProto> {
            m.field.iter().map(|f| (f.number(), f.clone())).collect()
        };
        let (was, is) = (fields(before), fields(after));
        for (number, field) in &was {
            match is.get(number) {
                None if reserved(after, *number, field.name()) => {}
                None => findings.breaking.push(format!(
                    "{name}: field {} = {number} was deleted (reserve its number and name instead)",
                    field.name()
                )),
                Some(now) => {
                    let (a, b) = (shape(before, field), shape(after, now));
                    if a != b {
                        findings
                            .breaking
                            .push(format!("{name}: field {number} was `{a}`, is `{b}`"));
                    }
                }
            }
        }
        for range in &before.reserved_range {
            let kept = (range.start()..range.end()).all(|n| {
                after
                    .reserved_range
                    .iter()
                    .any(|r| (r.start()..r.end()).contains(&n))
            });
            if !kept {
                findings.breaking.push(format!(
                    "{name}: reserved numbers {}..{} are no longer reserved",
                    range.start(),
                    range.end()
                ));
            }
        }
        for (number, field) in &is {
            if !was.contains_key(number) {
                findings
                    .added
                    .push(format!("{name}: {} = {number}", shape(after, field)));
            }
        }
    }
    for (name, before) in &old.enums {
        let Some(after) = new.enums.get(name) else {
            findings.breaking.push(format!("enum {name} was deleted"));
            continue;
        };
        for value in &before.value {
            match after.value.iter().find(|v| v.number() == value.number()) {
                None => findings.breaking.push(format!(
                    "{name}: value {} = {} was deleted",
                    value.name(),
                    value.number()
                )),
                Some(now) if now.name() != value.name() => findings.breaking.push(format!(
                    "{name}: value {} was {}, is {}",
                    value.number(),
                    value.name(),
                    now.name()
                )),
                Some(_) => {}
            }
        }
    }
    for name in new.messages.keys().chain(new.enums.keys()) {
        if !old.messages.contains_key(name) && !old.enums.contains_key(name) {
            findings.added.push(format!("new type {name}"));
        }
    }
    findings
}

fn current() -> FileDescriptorSet {
    FileDescriptorSet::decode(strata_log::event::FILE_DESCRIPTOR_SET).unwrap()
}

fn message_mut<'a>(set: &'a mut FileDescriptorSet, name: &str) -> &'a mut DescriptorProto {
    set.file
        .iter_mut()
        .flat_map(|f| f.message_type.iter_mut())
        .find(|m| m.name() == name)
        .unwrap_or_else(|| panic!("no message {name}"))
}

fn field_mut<'a>(
    set: &'a mut FileDescriptorSet,
    message: &str,
    name: &str,
) -> &'a mut FieldDescriptorProto {
    message_mut(set, message)
        .field
        .iter_mut()
        .find(|f| f.name() == name)
        .unwrap_or_else(|| panic!("no field {message}.{name}"))
}

#[test]
fn the_proto_keeps_every_field_of_the_frozen_descriptor_set() {
    let mut current = current();
    let frozen = std::fs::read(FROZEN_PATH).unwrap_or_default();
    let frozen = FileDescriptorSet::decode(frozen.as_slice()).unwrap();
    let findings = compare(&frozen, &current);
    assert!(
        findings.breaking.is_empty(),
        "log/protos/strata/v1/events.proto breaks its consumers:\n  {}",
        findings.breaking.join("\n  ")
    );
    if std::env::var_os("STRATA_FREEZE_PROTO").is_some() {
        for file in &mut current.file {
            file.source_code_info = None;
        }
        std::fs::write(FROZEN_PATH, current.encode_to_vec()).unwrap();
        eprintln!("froze {FROZEN_PATH}: {} additions", findings.added.len());
        return;
    }
    assert!(
        findings.added.is_empty(),
        "log/protos/strata/v1/events.proto adds what the frozen descriptor set lacks:\n  {}\n\
         freeze it in the same change: STRATA_FREEZE_PROTO=1 cargo test -p strata-log --test proto_contract",
        findings.added.join("\n  ")
    );
}

#[test]
fn a_reused_field_number_or_a_changed_type_breaks_the_contract() {
    let frozen = current();
    let breaking = |change: &dyn Fn(&mut FileDescriptorSet)| {
        let mut changed = frozen.clone();
        change(&mut changed);
        compare(&frozen, &changed).breaking
    };

    // A field's type changes.
    let found = breaking(&|set| field_mut(set, "RowsAppended", "row_count").set_type(Type::Int64));
    assert_eq!(
        found,
        [".strata.v1.RowsAppended: field 3 was `uint64 row_count`, is `int64 row_count`"]
    );
    // A message field's type names another message.
    let found = breaking(&|set| {
        field_mut(set, "TableCreated", "columns").type_name = Some(".strata.v1.DatasetAlias".into())
    });
    assert_eq!(found.len(), 1, "{found:?}");
    // A field is deleted and its number given to a new one.
    let found = breaking(&|set| {
        let field = field_mut(set, "Envelope", "request_id");
        field.name = Some("trace_id".into());
        field.json_name = Some("traceId".into());
    });
    assert_eq!(
        found,
        [".strata.v1.Envelope: field 6 was `string request_id`, is `string trace_id`"]
    );
    // Two fields swap numbers.
    let found = breaking(&|set| {
        field_mut(set, "RowsDeleted", "row_ids").number = Some(3);
        field_mut(set, "RowsDeleted", "vector_count").number = Some(2);
    });
    assert_eq!(found.len(), 2, "{found:?}");
    // A singular field becomes repeated.
    let found = breaking(&|set| field_mut(set, "Column", "name").set_label(Label::Repeated));
    assert_eq!(
        found,
        [".strata.v1.Column: field 1 was `string name`, is `repeated string name`"]
    );
    // A body leaves the oneof.
    let found = breaking(&|set| field_mut(set, "Envelope", "rows_deleted").oneof_index = None);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].contains("in oneof body"), "{found:?}");
    // A field is deleted without reserving it; a message is deleted.
    let found = breaking(&|set| {
        message_mut(set, "RowsUpdated")
            .field
            .retain(|f| f.number() != 5)
    });
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].contains("vectors_added = 5 was deleted"),
        "{found:?}"
    );
    let found = breaking(&|set| {
        for file in &mut set.file {
            file.message_type.retain(|m| m.name() != "ThreadDeleted");
        }
    });
    assert!(
        found.contains(&"message .strata.v1.ThreadDeleted was deleted".to_owned()),
        "{found:?}"
    );

    // What keeps the contract: a field deleted with its number and name reserved, and a field
    // added (found as an addition, not a break).
    let mut kept = frozen.clone();
    let message = message_mut(&mut kept, "RowsUpdated");
    message.field.retain(|f| f.number() != 5);
    message
        .reserved_range
        .push(prost_types::descriptor_proto::ReservedRange {
            start: Some(5),
            end: Some(6),
        });
    message.reserved_name.push("vectors_added".into());
    let mut field = message.field[0].clone();
    field.name = Some("comment".into());
    field.number = Some(9);
    field.set_type(Type::String);
    field.set_label(Label::Optional);
    message.field.push(field);
    let findings = compare(&frozen, &kept);
    assert!(findings.breaking.is_empty(), "{findings:?}");
    assert_eq!(
        findings.added,
        [".strata.v1.RowsUpdated: string comment = 9"]
    );
    // Un-reserving those numbers later breaks it again.
    let mut unreserved = kept.clone();
    message_mut(&mut unreserved, "RowsUpdated")
        .reserved_range
        .clear();
    let found = compare(&kept, &unreserved).breaking;
    assert_eq!(
        found,
        [".strata.v1.RowsUpdated: reserved numbers 5..6 are no longer reserved"]
    );
}
