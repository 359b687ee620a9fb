//! The optional model provider (`assistant.provider = "openai-compatible"`): a model behind an
//! OpenAI-compatible chat completions API is given the dataset's schema (fields, types, known
//! values), the previous plan and the question, and asked for a plan in the service's JSON plan
//! format. Its plan is checked against the schema ([`planner::check`]) and run through the
//! same access door as the built-in planner's; a plan that does not check out, a model that
//! does not answer in time, or one that answers something else, leaves the question to the
//! built-in planner.

use std::time::Duration;

use serde_json::{Value, json};

use crate::{
    config::AssistantConfig,
    engine::assistant::planner::{Plan, Schema, check},
};

/// What the model is told: the plan format, field by field.
const INSTRUCTIONS: &str = r#"You turn a question about one dataset into a query plan, as one JSON object and nothing else:
{"dataset": <the dataset's name>,
 "measure": {"op": "count"|"count_distinct"|"avg"|"sum"|"min"|"max"|"percentile"|"list"|"values", "field"?: <field>, "percentile"?: <0-100>},
 "filters"?: [{"field": <field>, "op": "eq"|"ne"|"gt"|"gte"|"lt"|"lte"|"contains", "value": <string|number|bool>}],
 "window"?: {"from"?: <date math: "now-1h", "now/d", or an RFC 3339 time>, "to"?: <same>, "said": <the words of the question that gave it>},
 "group_by"?: <field>, "interval"?: "1m"|"1h"|"1d"|"1w"|"1M", "limit"?: <1-1000>, "ascending"?: <bool>,
 "function"?: "rate"|"increase" (metrics datasets only; measure.field is then the metric, filters and group_by are labels)}
Use only the fields the schema lists. If the question cannot be answered from them, answer {"refuse": <why>}."#;

/// A client of the configured model, if there is one.
pub struct Model {
    http: reqwest::Client,
    url: String,
    model: String,
    key: Option<String>,
}

impl Model {
    /// The configured model; `None` when the provider is `none`.
    pub fn from_config(config: &AssistantConfig) -> anyhow::Result<Option<Model>> {
        if config.provider != "openai-compatible" {
            return Ok(None);
        }
        let key = match config.api_key_env.as_str() {
            "" => None,
            name => Some(std::env::var(name).map_err(|_| {
                anyhow::anyhow!("assistant.api_key_env names {name}, which is not set")
            })?),
        };
        Ok(Some(Model {
            http: reqwest::Client::builder()
                .timeout(Duration::from_millis(config.timeout_ms.max(1)))
                .build()?,
            url: format!("{}/chat/completions", config.base_url.trim_end_matches('/')),
            model: config.model.clone(),
            key,
        }))
    }

    /// The model's plan for `question`, checked against `schema`; why not otherwise.
    pub async fn plan(
        &self,
        question: &str,
        schema: &Schema,
        previous: Option<&Plan>,
    ) -> Result<Plan, String> {
        let context = json!({
            "schema": schema,
            "previous_plan": previous,
            "now": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        });
        let body = json!({
            "model": self.model,
            "temperature": 0,
            "response_format": {"type": "json_object"},
            "messages": [
                {"role": "system", "content": INSTRUCTIONS},
                {"role": "system", "content": context.to_string()},
                {"role": "user", "content": question},
            ],
        });
        let mut request = self.http.post(&self.url).json(&body);
        if let Some(key) = &self.key {
            request = request.bearer_auth(key);
        }
        let response = request
            .send()
            .await
            .map_err(|e| format!("the model did not answer: {e}"))?;
        if !response.status().is_success() {
            return Err(format!("the model answered {}", response.status()));
        }
        let answer: Value = response
            .json()
            .await
            .map_err(|e| format!("the model's answer is not JSON: {e}"))?;
        let text = answer["choices"][0]["message"]["content"]
            .as_str()
            .ok_or("the model's answer has no message")?;
        // Models sometimes fence their JSON.
        let text = text
            .trim()
            .trim_start_matches("```json")
            .trim_start_matches("```")
            .trim_end_matches("```")
            .trim();
        let value: Value =
            serde_json::from_str(text).map_err(|e| format!("the model's plan is not JSON: {e}"))?;
        if let Some(why) = value.get("refuse") {
            return Err(format!("the model refused: {why}"));
        }
        let plan: Plan = serde_json::from_value(value)
            .map_err(|e| format!("the model's plan is not a plan: {e}"))?;
        check::checked(plan, schema).map_err(|e| format!("the model's plan does not hold: {e}"))
    }
}
