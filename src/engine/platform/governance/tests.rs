//! Role documents as the engine reads them, the grants they make, and passwords.

#![allow(clippy::unwrap_used, clippy::panic, clippy::expect_used)]

use serde_json::json;
use strata_projections::control::ControlState;

use super::*;

fn role(yaml: &str) -> Result<Role> {
    let doc: RoleDoc = serde_norway::from_str(yaml).unwrap();
    role_from_doc("acme", "r", &doc)
}

#[test]
fn a_role_document_reads_back_as_it_was_written() {
    let yaml = r#"
Version: 2025-01-01
Permissions:
  - ResourceType: record
    Actions: [read, write]
    Resources: ["logs-*", "metrics"]
    Fields:
      Allow: [team, "user.*"]
      Deny: ["secret_*"]
      Mask: {email: redact, phone: nullify}
    Filter: {term: {team: a}}
  - ResourceType: dataset
    Actions: [create]
    Resources: ["pg/*"]
  - ResourceType: field
    Resources: ["*"]
Notifications:
  Monitor: [{Actions: [read, execute], Resources: ["team-*"]}]
  Config: [{Actions: [write], Resources: ["*"]}]
"#;
    let parsed: RoleDoc = serde_norway::from_str(yaml).unwrap();
    let role = role(yaml).unwrap();
    assert_eq!(doc_of(&role), parsed);
    assert_eq!(
        role.permissions[0].filter_json.as_deref(),
        Some(r#"{"term":{"team":"a"}}"#)
    );
    assert_eq!(role.notifications.len(), 2);
}

#[test]
fn a_wrong_document_is_refused_naming_its_field() {
    for (yaml, field) in [
        (
            "Version: 2025-01-01\nPermissions: [{ResourceType: record, Actions: [], Resources: ['*']}]",
            "Permissions[0].Actions",
        ),
        (
            "Version: 2025-01-01\nPermissions: [{ResourceType: field, Actions: [read], Resources: ['*']}]",
            "Permissions[0].Actions[0]",
        ),
        (
            "Version: 2025-01-01\nPermissions: [{ResourceType: record, Actions: [read], Resources: []}]",
            "Permissions[0].Resources",
        ),
        (
            "Version: 2025-01-01\nPermissions: [{ResourceType: record, Actions: [read], Resources: ['a b']}]",
            "Permissions[0].Resources[0]",
        ),
        (
            "Version: 2025-01-01\nPermissions: [{ResourceType: dataset, Actions: [create], Resources: ['*'], Fields: {Deny: [x]}}]",
            "Permissions[0].Fields",
        ),
        (
            "Version: 2025-01-01\nPermissions: [{ResourceType: record, Actions: [read], Resources: ['*'], Filter: [1]}]",
            "Permissions[0].Filter",
        ),
        (
            "Version: 2025-01-01\nPermissions: [{ResourceType: record, Actions: [read], Resources: ['*'], Fields: {Deny: ['']}}]",
            "Permissions[0].Fields.Deny[0]",
        ),
        (
            "Version: 2025-01-01\nNotifications: {Monitor: [{Actions: [fly], Resources: ['*']}]}",
            "Notifications.Monitor[0].Actions[0]",
        ),
        (
            "Version: 2025-01-01\nNotifications: {Channel: [{Actions: [read], Resources: []}]}",
            "Notifications.Channel[0].Resources",
        ),
    ] {
        match role(yaml) {
            Err(Error::BadRequest(message)) => {
                assert!(
                    message.starts_with(field),
                    "{message:?} should name {field}"
                )
            }
            other => panic!("{yaml}: {other:?}"),
        }
    }
}

#[test]
fn a_user_is_granted_the_union_of_the_roles_it_holds_that_exist() {
    let mut state = ControlState::default();
    for (name, yaml) in [
        (
            "readers",
            "Version: 2025-01-01\nPermissions: [{ResourceType: record, Actions: [read], Resources: ['logs-*'], Fields: {Mask: {email: redact}}, Filter: {term: {team: a}}}]",
        ),
        (
            "creators",
            "Version: 2025-01-01\nPermissions: [{ResourceType: dataset, Actions: [create, delete], Resources: ['tmp-*']}, {ResourceType: field, Resources: ['*']}]",
        ),
    ] {
        let doc: RoleDoc = serde_norway::from_str(yaml).unwrap();
        let role = role_from_doc("acme", name, &doc).unwrap();
        state.roles.insert(("acme".into(), name.into()), role);
    }
    let user = |roles: &[&str], root: bool| User {
        account: "acme".into(),
        name: "ann".into(),
        access_key: "AK".into(),
        sealed_secret: Vec::new(),
        root,
        roles: roles.iter().map(|r| (*r).to_owned()).collect(),
        password_hash: None,
        created_at_micros: 0,
    };
    let grant = grant_of(&state, &user(&["readers", "creators", "gone"], false));
    assert_eq!(
        grant.permissions.len(),
        2,
        "the field entry grants no action"
    );
    assert!(grant.allows(Action::RecordRead, "logs-web"));
    assert!(!grant.allows(Action::RecordWrite, "logs-web"));
    assert!(grant.allows(Action::DatasetDelete, "tmp-1"));
    assert!(!grant.allows(Action::DatasetCreate, "logs-web"));
    assert_eq!(
        grant.permissions[0].filter,
        Some(json!({"term": {"team": "a"}}))
    );
    assert_eq!(
        grant.permissions[0].fields.mask,
        [("email".to_owned(), Mask::Redact)]
    );
    assert!(grant_of(&state, &user(&[], false)).is_nothing());
    assert!(grant_of(&state, &user(&[], true)).all);
}

#[test]
fn a_password_verifies_against_its_salted_hash_only() {
    let first = hash_password("correct-horse-battery").unwrap();
    let second = hash_password("correct-horse-battery").unwrap();
    assert!(first.starts_with("$argon2id$"), "{first}");
    assert_ne!(first, second, "salted");
    assert!(verify_password(&first, "correct-horse-battery"));
    assert!(!verify_password(&first, "correct-horse-batterz"));
    assert!(!verify_password("not a hash", "correct-horse-battery"));
}
