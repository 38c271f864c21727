//! Which mechanism the preload runs: `BRAID_MIDDLEWARE` (a mechanism's name, or a scenario
//! entry as JSON, `{"kind": "raw"}`), `raw` when unset. Read once when the library loads; a bad
//! value ends the process with one line and exit code 2 before the application starts.

use braid_middleware::MiddlewareEntry;
use braid_verbs::{Caps, HostCtx, Middleware};

#[derive(Debug)]
pub struct Choice {
    pub entry: MiddlewareEntry,
}

impl Choice {
    /// One layer for one context (the context is the preload's tenant).
    pub fn build(&self) -> Result<Box<dyn Middleware>, String> {
        let mut host = HostCtx::new(0, Caps::default());
        self.entry
            .0
            .factory()
            .build(&mut host, 1)
            .map_err(|e| e.to_string())
    }
    pub fn name(&self) -> &'static str {
        self.entry.0.name()
    }
}

/// `BRAID_MIDDLEWARE`'s value, parsed; the error is the line to print.
pub fn parse(value: Option<&str>) -> Result<Choice, String> {
    let v = value
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .unwrap_or("raw");
    let json = if v.starts_with('{') {
        v.to_string()
    } else {
        serde_json::Value::String(v.to_string()).to_string()
    };
    let entry: MiddlewareEntry = serde_json::from_str(&json).map_err(|e| {
        // serde's position suffix says nothing about an environment variable.
        let m = e.to_string();
        let m = m.split(" at line ").next().unwrap_or(&m).to_string();
        format!("BRAID_MIDDLEWARE={v}: {m}; expected a mechanism's name, e.g. raw")
    })?;
    let name = entry.0.name();
    if name != "raw" {
        return Err(format!(
            "BRAID_MIDDLEWARE={v}: the preload runs only `raw` today; `{name}` needs the \
             per-host agent and layer timers (issue 32 §2), so it is refused rather than run \
             half-way; expected raw"
        ));
    }
    Ok(Choice { entry })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_is_the_default_and_names_or_tables_are_accepted() {
        assert_eq!(parse(None).unwrap().name(), "raw");
        assert_eq!(parse(Some("raw")).unwrap().name(), "raw");
        assert_eq!(parse(Some(r#"{"kind":"raw"}"#)).unwrap().name(), "raw");
        assert_eq!(parse(Some("raw")).unwrap().build().unwrap().name(), "raw");
    }

    #[test]
    fn bad_values_name_the_key_and_the_expected_form() {
        let e = parse(Some("nope")).unwrap_err();
        assert!(
            e.starts_with("BRAID_MIDDLEWARE=nope:") && e.contains("expected"),
            "{e}"
        );
        let e = parse(Some("justitia")).unwrap_err();
        assert!(
            e.contains("only `raw`") && e.contains("expected raw"),
            "{e}"
        );
        assert!(!e.contains('\n'));
    }
}
