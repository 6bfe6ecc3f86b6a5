//! JSON Schema (draft 2020-12) for the request and the result, generated from the types, so the
//! MCP tool schemas, the OpenAPI file and the checked-in copies cannot drift from the code.

use schemars::generate::SchemaSettings;
use serde_json::Value;

use crate::request::ExecutionRequest;
use crate::result::ExecutionResult;
use crate::task::TaskRecord;
use crate::worktree::WorktreeAnswer;

fn generate<T: schemars::JsonSchema>() -> Value {
    let generator = SchemaSettings::draft2020_12().into_generator();
    generator.into_root_schema_for::<T>().to_value()
}

/// The request's JSON Schema.
pub fn request_schema() -> Value {
    generate::<ExecutionRequest>()
}

/// The result's JSON Schema.
pub fn result_schema() -> Value {
    generate::<ExecutionResult>()
}

/// The background task record's JSON Schema.
pub fn task_record_schema() -> Value {
    generate::<TaskRecord>()
}

/// The JSON Schema of the answer to `apply`, `apply --check` and `discard`.
pub fn worktree_answer_schema() -> Value {
    generate::<WorktreeAnswer>()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn request_schema_keeps_the_rules() {
        let s = request_schema();
        assert_eq!(
            s["$schema"],
            json!("https://json-schema.org/draft/2020-12/schema")
        );
        assert_eq!(s["additionalProperties"], json!(false));
        assert_eq!(s["required"], json!(["objective", "context"]));
        let objective = &s["$defs"]["Objective"];
        assert_eq!(objective["maxLength"], json!(50000), "{s:#}");
        assert_eq!(objective["minLength"], json!(1));
        assert_eq!(s["$defs"]["Runtime"]["maximum"], json!(86400));
        assert_eq!(s["$defs"]["Context"]["additionalProperties"], json!(false));
    }

    #[test]
    fn result_schema_names_every_status() {
        let s = result_schema();
        let statuses = &s["$defs"]["Status"];
        let names: Vec<&str> = statuses["oneOf"]
            .as_array()
            .map(|a| a.iter().filter_map(|v| v["const"].as_str()).collect())
            .unwrap_or_default();
        assert_eq!(
            names,
            [
                "success",
                "partial",
                "failed",
                "timeout",
                "cancelled",
                "error"
            ],
            "{statuses:#}"
        );
    }
}
