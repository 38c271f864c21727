//! Which mechanism the preload runs: `BRAID_MIDDLEWARE` (a mechanism's name, or a scenario
//! entry as JSON, `{"kind": "justitia", "line_rate": "200Mbps"}`), or the file `BRAID_CONFIG`
//! names (the same JSON entry), `raw` when neither is set. Read once when the library loads; a
//! bad value ends the process with one line and exit code 2 before the application starts.
//!
//! The keys are a scenario's (`braid_middleware::MiddlewareEntry`); the values are checked by
//! building the mechanism once on a trial host, so that a bad value (`target = "0us"`) is
//! refused at load rather than when the application opens its device.

use braid_middleware::MiddlewareEntry;
use braid_verbs::{rendezvous, Caps, HostCtx, Middleware, TenantId};

/// The mechanisms the preload runs. The others need objects of their own on the application's
/// context (partition's sub-QPs, Virtuoso's paths, PeRF's managed QPs) or cross-process agents
/// (DRUM's pool): refused at load with one line (docs/preload.md, *Limits*).
pub const SUPPORTED: &[&str] = &["raw", "justitia"];

#[derive(Debug)]
pub struct Choice {
    pub entry: MiddlewareEntry,
}

impl Choice {
    /// The layer of tenant `tenant` (one per adopted context) on the process's host; a
    /// host-scoped mechanism's agent joins `host`'s agent slot (`HostCtx::take_agents`).
    pub fn build(
        &self,
        host: &mut HostCtx,
        tenant: TenantId,
    ) -> Result<Box<dyn Middleware>, String> {
        self.entry
            .0
            .factory()
            .build(host, tenant)
            .map_err(|e| e.to_string())
    }
    pub fn name(&self) -> &'static str {
        self.entry.0.name()
    }
    /// Whether the mechanism sets timers or wakes (then the preload runs its helper thread).
    pub fn needs_events(&self) -> bool {
        self.name() != "raw"
    }
}

/// The configuration from the process's environment: `BRAID_MIDDLEWARE`, else the file
/// `BRAID_CONFIG` names.
pub fn from_env() -> Result<Choice, String> {
    let mw = std::env::var("BRAID_MIDDLEWARE").ok();
    let file = std::env::var("BRAID_CONFIG")
        .ok()
        .filter(|f| !f.trim().is_empty());
    match (mw.as_deref().map(str::trim).filter(|v| !v.is_empty()), file) {
        (Some(_), Some(f)) => Err(format!(
            "BRAID_CONFIG={f}: set either BRAID_MIDDLEWARE or BRAID_CONFIG, not both; expected one \
             of them"
        )),
        (_, Some(f)) => {
            let text = std::fs::read_to_string(&f).map_err(|e| {
                format!("BRAID_CONFIG={f}: cannot read it ({e}); expected a readable file")
            })?;
            parse_as("BRAID_CONFIG", &f, Some(&text))
        }
        (v, None) => parse(v),
    }
}

/// `BRAID_MIDDLEWARE`'s value, parsed; the error is the line to print.
pub fn parse(value: Option<&str>) -> Result<Choice, String> {
    let v = value.map(str::trim).unwrap_or("");
    parse_as("BRAID_MIDDLEWARE", v, value)
}

/// `value` (a name or a JSON entry) parsed; errors name `key=shown`.
fn parse_as(key: &str, shown: &str, value: Option<&str>) -> Result<Choice, String> {
    let v = value
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .unwrap_or("raw");
    let json = if v.starts_with('{') {
        v.to_string()
    } else {
        serde_json::Value::String(v.to_string()).to_string()
    };
    let shown = if shown.is_empty() { v } else { shown };
    let entry: MiddlewareEntry = serde_json::from_str(&json).map_err(|e| {
        // serde's position suffix says nothing about an environment variable.
        let m = e.to_string();
        let m = m.split(" at line ").next().unwrap_or(&m).to_string();
        format!(
            "{key}={shown}: {m}; expected a mechanism's name, e.g. raw, or a JSON table such as \
             {{\"kind\":\"justitia\",\"line_rate\":\"10Gbps\"}}"
        )
    })?;
    let name = entry.0.name();
    if !SUPPORTED.contains(&name) {
        return Err(format!(
            "{key}={shown}: the preload runs {} today; `{name}` needs objects of its own on the \
             application's context or the per-host agent across processes (issue 32), so it is \
             refused rather than run half-way; expected one of {}",
            SUPPORTED.join(", "),
            SUPPORTED.join(", ")
        ));
    }
    let choice = Choice { entry };
    // The values, checked the way the mechanism checks them when a context opens.
    let mut trial = HostCtx::new(
        0,
        Caps {
            line_rate_bps: 1_000_000_000,
            ..Caps::default()
        },
    )
    .with_board(rendezvous::board());
    choice
        .build(&mut trial, 1)
        .map_err(|e| format!("{key}={shown}: {e}"))?;
    Ok(choice)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host() -> HostCtx {
        HostCtx::new(0, Caps::default()).with_board(rendezvous::board())
    }

    #[test]
    fn raw_is_the_default_and_names_or_tables_are_accepted() {
        assert_eq!(parse(None).unwrap().name(), "raw");
        assert_eq!(parse(Some("raw")).unwrap().name(), "raw");
        assert_eq!(parse(Some(r#"{"kind":"raw"}"#)).unwrap().name(), "raw");
        assert_eq!(
            parse(Some("raw"))
                .unwrap()
                .build(&mut host(), 1)
                .unwrap()
                .name(),
            "raw"
        );
        let j = parse(Some(
            r#"{"kind":"justitia","line_rate":"200Mbps","big_chunk":"16KB"}"#,
        ))
        .unwrap();
        assert_eq!(j.name(), "justitia");
        assert!(j.needs_events());
        assert_eq!(j.build(&mut host(), 1).unwrap().name(), "justitia");
    }

    #[test]
    fn bad_values_name_the_key_and_the_expected_form() {
        let e = parse(Some("nope")).unwrap_err();
        assert!(
            e.starts_with("BRAID_MIDDLEWARE=nope:") && e.contains("expected"),
            "{e}"
        );
        let e = parse(Some("partition")).unwrap_err();
        assert!(
            e.contains("runs raw, justitia today") && e.contains("expected one of"),
            "{e}"
        );
        // A value the mechanism itself refuses is refused at load, naming the key.
        let e = parse(Some(r#"{"kind":"justitia","target":"0us"}"#)).unwrap_err();
        assert!(e.contains("target") && e.contains("positive"), "{e}");
        let e = parse(Some(r#"{"kind":"justitia","bogus":1}"#)).unwrap_err();
        assert!(e.contains("bogus") && e.contains("expected"), "{e}");
        assert!(!e.contains('\n'));
    }

    #[test]
    fn a_config_file_holds_the_same_entry() {
        let p = std::env::temp_dir().join(format!("braid-preload-cfg-{}.json", std::process::id()));
        std::fs::write(&p, r#"{"kind":"justitia","line_rate":"1Gbps"}"#).unwrap();
        let text = std::fs::read_to_string(&p).unwrap();
        let c = parse_as("BRAID_CONFIG", p.to_str().unwrap(), Some(&text)).unwrap();
        assert_eq!(c.name(), "justitia");
        std::fs::remove_file(&p).unwrap();
    }
}
