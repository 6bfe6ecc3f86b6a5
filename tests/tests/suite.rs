//! The suites. Each module tests one thing end to end; `support_selftest` checks the support code
//! itself (scripted model, fake droid, process helpers) and that the real droid runs against it.

mod binary;
mod bridge_daemon;
mod bridge_harness;
mod bridge_http;
mod bridge_real_droid;
mod cli;
mod common;
mod config_show;
mod doctor;
mod engine_fake_droid;
mod engine_real_droid;
mod fault_matrix;
mod faults_droid;
mod faults_model;
mod faults_store;
mod mcp_agents;
mod mcp_node;
mod mcp_python;
mod mcp_real_world;
mod mcp_stdio;
mod mcp_wire_modern;
mod mcp_wire_rules;
mod packaging;
mod provider_opencode;
mod result_shape;
mod security;
mod setup_mcp;
mod setup_skill;
mod skill;
mod support_selftest;
mod tasks_cli;
mod tasks_fake_droid;
mod tasks_real_droid;
mod tasks_store;
mod tidy;
