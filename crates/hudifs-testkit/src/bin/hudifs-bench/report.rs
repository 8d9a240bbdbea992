//! `report`: report.md and report.json from the results file, and the summary table.

use std::path::Path;

use serde_json::json;

use crate::record::{sym, Record};
use crate::Res;

fn fmt_num(v: f64) -> String {
    if !v.is_finite() {
        "-".into()
    } else if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.4}")
    }
}

pub fn report(results: &Path, md: &Path, json_out: &Path, header: &str) -> Res<()> {
    let text =
        std::fs::read_to_string(results).map_err(|e| format!("{}: {e}", results.display()))?;
    let mut recs: Vec<Record> = Vec::new();
    for l in text.lines().filter(|l| !l.trim().is_empty()) {
        recs.push(serde_json::from_str(l).map_err(|e| format!("{e}: {l}"))?);
    }
    recs.sort_by_key(|r| r.figure);
    let mut m = String::new();
    m.push_str("# hudifs benchmark report\n\n");
    if !header.is_empty() {
        m.push_str(header);
        m.push_str("\n\n");
    }
    m.push_str(
        "Each figure: both sides measured in the same run, interleaved; medians of the repetitions.\n\n",
    );
    m.push_str(
        "| # | figure | measured (median) | reference (median) | ratio | target | result |\n",
    );
    m.push_str("|---|---|---|---|---|---|---|\n");
    for r in &recs {
        let target = r
            .target
            .as_ref()
            .map(|(c, t)| format!("{} {t}", sym(c)))
            .unwrap_or_else(|| "-".into());
        let res = match r.pass {
            Some(true) => "pass",
            Some(false) => "**miss**",
            None => "info",
        };
        m.push_str(&format!(
            "| {} | {} (`{}`) | {}: {} {} | {}: {} {} | {} | {} | {} |\n",
            r.figure,
            r.title,
            r.id,
            r.a.label,
            fmt_num(r.a.median),
            r.a.unit,
            r.b.label,
            fmt_num(r.b.median),
            r.b.unit,
            fmt_num(r.ratio),
            target,
            res
        ));
    }
    m.push_str("\n## Details\n");
    for r in &recs {
        m.push_str(&format!("\n### {} — {}\n\n", r.id, r.title));
        m.push_str(&format!(
            "- ratio: {} = {}\n",
            r.ratio_def,
            fmt_num(r.ratio)
        ));
        for s in [&r.a, &r.b] {
            let samples: Vec<String> = s.samples.iter().map(|v| fmt_num(*v)).collect();
            m.push_str(&format!(
                "- {} ({}): median {}; samples {}\n",
                s.label,
                s.unit,
                fmt_num(s.median),
                samples.join(", ")
            ));
        }
        for n in &r.notes {
            m.push_str(&format!("- {n}\n"));
        }
        m.push_str(&format!("- command: `{}`\n", r.command));
    }
    for p in [md, json_out] {
        if let Some(d) = p.parent() {
            std::fs::create_dir_all(d).map_err(|e| e.to_string())?;
        }
    }
    std::fs::write(md, &m).map_err(|e| format!("{}: {e}", md.display()))?;
    let j = json!({"header": header, "figures": recs});
    let s = serde_json::to_string_pretty(&j).map_err(|e| e.to_string())?;
    std::fs::write(json_out, s + "\n").map_err(|e| format!("{}: {e}", json_out.display()))?;
    println!();
    println!(
        "{:<3} {:<30} {:>14} {:>14} {:>9} {:>8} {:>6}",
        "#", "figure", "measured", "reference", "ratio", "target", "result"
    );
    for r in &recs {
        let target = r
            .target
            .as_ref()
            .map(|(c, t)| format!("{}{t}", sym(c)))
            .unwrap_or_else(|| "-".into());
        println!(
            "{:<3} {:<30} {:>14} {:>14} {:>9} {:>8} {:>6}",
            r.figure,
            r.id,
            format!("{} {}", fmt_num(r.a.median), r.a.unit),
            format!("{} {}", fmt_num(r.b.median), r.b.unit),
            fmt_num(r.ratio),
            target,
            match r.pass {
                Some(true) => "pass",
                Some(false) => "MISS",
                None => "info",
            }
        );
    }
    println!("\nreport: {} and {}", md.display(), json_out.display());
    Ok(())
}
