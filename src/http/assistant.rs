//! Conversation (spec 001 section 4.5, API.md "Conversation"): threads and their messages,
//! bodies and answers JSON; and the conversation socket, GET /assistant/nl.

use std::{collections::HashSet, time::Duration};

use axum::{
    Json,
    body::Bytes,
    extract::ws::{
        Message as WsMessage, WebSocket, WebSocketUpgrade, rejection::WebSocketUpgradeRejection,
    },
    http::StatusCode,
    response::{IntoResponse, Response},
};
use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::sync::broadcast;

use super::{
    AppState, Signed, alerting::id_of, body::PathName, documents::json_body, error::PlatformError,
};
use crate::{engine::PlatformPrincipal, error::Error};

/// A request's JSON body (null when empty: the engine refuses it as a missing object).
fn body_of(body: &Bytes, operation: &'static str) -> Result<Value, PlatformError> {
    json_body(body).map_err(PlatformError::of(operation))
}

/// GET /assistant/threads: the caller's threads, newest first.
pub async fn list_threads(
    Signed {
        state, principal, ..
    }: Signed,
) -> Result<Response, PlatformError> {
    let threads = state
        .engine
        .list_threads(&principal)
        .await
        .map_err(PlatformError::of("list threads"))?;
    Ok(Json(threads).into_response())
}

/// POST /assistant/threads: `{name, index_name, status?, viz_context?, workflow_name?}` → 201
/// with the thread.
pub async fn create_thread(
    Signed {
        state,
        principal,
        request_id,
    }: Signed,
    body: Bytes,
) -> Result<Response, PlatformError> {
    const OP: &str = "create thread";
    let doc = body_of(&body, OP)?;
    let thread = state
        .engine
        .create_thread(&principal, &doc, &principal.origin(&request_id.0))
        .await
        .map_err(PlatformError::of(OP))?;
    Ok((StatusCode::CREATED, Json(thread)).into_response())
}

/// GET /assistant/threads/{id}: the thread with user_context, system_context and schema.
pub async fn get_thread(
    Signed {
        state, principal, ..
    }: Signed,
    id: Result<PathName, Error>,
) -> Result<Response, PlatformError> {
    const OP: &str = "get thread";
    let id = id_of(id, OP)?;
    let thread = state
        .engine
        .get_thread(&principal, &id)
        .await
        .map_err(PlatformError::of(OP))?;
    Ok(Json(thread).into_response())
}

/// PUT or PATCH /assistant/threads/{id}: any of `{name, status, viz_context}`.
pub async fn update_thread(
    Signed {
        state,
        principal,
        request_id,
    }: Signed,
    id: Result<PathName, Error>,
    body: Bytes,
) -> Result<Response, PlatformError> {
    const OP: &str = "update thread";
    let id = id_of(id, OP)?;
    let doc = body_of(&body, OP)?;
    let thread = state
        .engine
        .update_thread(&principal, &id, &doc, &principal.origin(&request_id.0))
        .await
        .map_err(PlatformError::of(OP))?;
    Ok(Json(thread).into_response())
}

/// DELETE /assistant/threads/{id}: `true`.
pub async fn delete_thread(
    Signed {
        state,
        principal,
        request_id,
    }: Signed,
    id: Result<PathName, Error>,
) -> Result<Response, PlatformError> {
    const OP: &str = "delete thread";
    let id = id_of(id, OP)?;
    state
        .engine
        .delete_thread(&principal, &id, &principal.origin(&request_id.0))
        .await
        .map_err(PlatformError::of(OP))?;
    Ok(Json(true).into_response())
}

/// Adds the message of `body` (to the thread of the path, when there is one): `true`.
async fn add_message(
    Signed {
        state,
        principal,
        request_id,
    }: Signed,
    thread: Option<&str>,
    body: &Bytes,
) -> Result<Response, PlatformError> {
    const OP: &str = "add message";
    let doc = body_of(body, OP)?;
    let message = state
        .engine
        .add_message(&principal, &doc, thread, &principal.origin(&request_id.0))
        .await
        .map_err(PlatformError::of(OP))?;
    state.assistant.spawn_answer(principal, message);
    Ok(Json(true).into_response())
}

/// POST /assistant/message: a message with its thread_id.
pub async fn post_message(signed: Signed, body: Bytes) -> Result<Response, PlatformError> {
    add_message(signed, None, &body).await
}

/// POST /assistant/threads/{id}/messages: a message to the thread of the path.
pub async fn post_thread_message(
    signed: Signed,
    id: Result<PathName, Error>,
    body: Bytes,
) -> Result<Response, PlatformError> {
    let id = id_of(id, "add message")?;
    add_message(signed, Some(&id), &body).await
}

/// GET /assistant/threads/{id}/messages: the thread's messages, oldest first.
pub async fn list_messages(
    Signed {
        state, principal, ..
    }: Signed,
    id: Result<PathName, Error>,
) -> Result<Response, PlatformError> {
    const OP: &str = "list messages";
    let id = id_of(id, OP)?;
    let messages = state
        .engine
        .list_messages(&principal, &id)
        .await
        .map_err(PlatformError::of(OP))?;
    Ok(Json(messages).into_response())
}

/// DELETE /assistant/threads/{id}/messages: `{status, message, thread_id, deleted_count}`.
pub async fn clear_messages(
    Signed {
        state,
        principal,
        request_id,
    }: Signed,
    id: Result<PathName, Error>,
) -> Result<Response, PlatformError> {
    const OP: &str = "delete messages";
    let id = id_of(id, OP)?;
    let cleared = state
        .engine
        .clear_messages(&principal, &id, &principal.origin(&request_id.0))
        .await
        .map_err(PlatformError::of(OP))?;
    Ok(Json(cleared).into_response())
}

/// GET /assistant/nl: upgrades to the conversation socket (see [`session`]).
pub async fn nl(
    Signed {
        state, principal, ..
    }: Signed,
    ws: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Result<Response, PlatformError> {
    let ws = ws.map_err(|rejection| PlatformError {
        operation: "conversation channel",
        error: Error::BadRequest(format!(
            "GET /assistant/nl upgrades to a WebSocket: {}",
            rejection.body_text()
        )),
    })?;
    Ok(ws.on_upgrade(move |socket| session(state, principal, socket)))
}

/// An error frame.
fn error_frame(thread_id: Option<&str>, message: &str) -> Value {
    json!({"type": "error", "thread_id": thread_id, "message": message})
}

/// One conversation socket. Frames are JSON text. The client subscribes to a thread
/// (`{"type": "subscribe", "thread_id"}`, answered `{"type": "subscribed", "thread_id"}`) or
/// asks a question (a message, `{"thread_id", "role": "user", "content": {"user_query"}}`,
/// added to the thread as POST /assistant/message adds it, and its thread subscribed). For each
/// question added to a subscribed thread (here or over HTTP) the server sends progress frames,
/// then the answer or an error. Whatever goes wrong is an error frame; the socket stays open.
/// An idle socket is pinged every `assistant.ping_ms`.
async fn session(state: AppState, principal: PlatformPrincipal, socket: WebSocket) {
    let (mut sender, mut receiver) = socket.split();
    let mut frames = state.assistant.subscribe();
    let mut threads: HashSet<String> = HashSet::new();
    let every = Duration::from_millis(state.engine.config().assistant.ping_ms.max(10));
    let mut ping = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    loop {
        let reply = tokio::select! {
            incoming = receiver.next() => match incoming {
                None | Some(Err(_)) | Some(Ok(WsMessage::Close(_))) => break,
                Some(Ok(WsMessage::Text(text))) => {
                    Some(received(&state, &principal, &mut threads, text.as_str()).await)
                }
                Some(Ok(WsMessage::Binary(_))) => {
                    Some(error_frame(None, "frames are JSON text, not binary"))
                }
                Some(Ok(_)) => None,
            },
            frame = frames.recv() => match frame {
                Ok(frame) if frame.account == principal.account && threads.contains(&frame.thread_id) => {
                    Some(frame.body.clone())
                }
                Ok(_) => None,
                Err(broadcast::error::RecvError::Lagged(missed)) => Some(error_frame(
                    None,
                    &format!("{missed} frames were missed; GET /assistant/threads/{{id}}/messages has every answer"),
                )),
                Err(broadcast::error::RecvError::Closed) => break,
            },
            _ = ping.tick() => {
                if sender.send(WsMessage::Ping(Bytes::new())).await.is_err() {
                    break;
                }
                None
            }
        };
        if let Some(reply) = reply {
            ping.reset();
            if sender
                .send(WsMessage::Text(reply.to_string().into()))
                .await
                .is_err()
            {
                break;
            }
        }
    }
}

/// What a client's frame asks, done; the frame that answers it.
async fn received(
    state: &AppState,
    principal: &PlatformPrincipal,
    threads: &mut HashSet<String>,
    text: &str,
) -> Value {
    let doc: Value = match serde_json::from_str(text) {
        Ok(doc @ Value::Object(_)) => doc,
        Ok(_) | Err(_) => {
            return error_frame(
                None,
                "a frame is a JSON object: {\"type\": \"subscribe\", \"thread_id\"} or a message {\"thread_id\", \"role\": \"user\", \"content\": {\"user_query\"}}",
            );
        }
    };
    let thread_id = doc["thread_id"].as_str().map(str::to_owned);
    if doc["type"] == "subscribe" {
        let Some(id) = thread_id else {
            return error_frame(None, "subscribe: thread_id is required");
        };
        return match state.engine.thread(principal, &id).await {
            Ok(_) => {
                threads.insert(id.clone());
                json!({"type": "subscribed", "thread_id": id})
            }
            Err(error) => error_frame(Some(&id), &format!("subscribe: {}", error.public_message())),
        };
    }
    if let Some(kind) = doc.get("type").filter(|t| *t != "message") {
        return error_frame(
            thread_id.as_deref(),
            &format!("unknown frame type {kind}; a frame subscribes or is a message"),
        );
    }
    let mut message = doc.clone();
    if let Some(map) = message.as_object_mut() {
        map.remove("type");
    }
    let origin = principal.origin(&uuid::Uuid::now_v7().to_string());
    match state
        .engine
        .add_message(principal, &message, None, &origin)
        .await
    {
        Ok(added) => {
            threads.insert(added.thread_id.clone());
            let reply = json!({"type": "accepted", "thread_id": added.thread_id, "message_id": added.message_id});
            state.assistant.spawn_answer(principal.clone(), added);
            reply
        }
        Err(error) => error_frame(
            thread_id.as_deref(),
            &format!("add message: {}", error.public_message()),
        ),
    }
}
