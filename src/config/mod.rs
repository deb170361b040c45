//! The machine config (spec §2): typed model, validation with JSON-pointer diagnostics,
//! module environment and module version selection.
pub(crate) mod diag;
pub(crate) mod eap_rules;
pub mod env;
pub(crate) mod input_keys;
pub mod model;
pub(crate) mod validate;
pub(crate) mod version;

pub use diag::{Diagnostic, Report};
pub use model::{LogSettings, MachineConfig};
pub use validate::{parse_slice, parse_str, parse_value};
