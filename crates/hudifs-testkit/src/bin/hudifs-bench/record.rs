//! The figure records: both sides of a figure, their medians and the ratio against the target,
//! appended one JSON line per figure to the results file.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::Res;

#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct Side {
    pub label: String,
    pub unit: String,
    pub samples: Vec<f64>,
    pub median: f64,
}

impl Side {
    pub fn new(label: &str, unit: &str, samples: Vec<f64>) -> Side {
        Side {
            label: label.into(),
            unit: unit.into(),
            median: median(&samples),
            samples,
        }
    }
}

#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct Record {
    /// Figure number (README.md, Benchmarks: 1–5; 8 is s3list).
    pub figure: u32,
    pub id: String,
    pub title: String,
    /// The measured side and the reference side.
    pub a: Side,
    pub b: Side,
    /// `a.median / b.median` (or as `ratio_def` says).
    pub ratio: f64,
    pub ratio_def: String,
    /// `>=` or `<=`, with the target; `None`: reported for information.
    pub target: Option<(String, f64)>,
    pub pass: Option<bool>,
    pub command: String,
    pub notes: Vec<String>,
}

impl Record {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        figure: u32,
        id: &str,
        title: &str,
        a: Side,
        b: Side,
        ratio_def: &str,
        target: Option<(&str, f64)>,
        notes: Vec<String>,
    ) -> Record {
        let ratio = if b.median != 0.0 {
            a.median / b.median
        } else {
            f64::NAN
        };
        let pass = target.map(|(cmp, t)| if cmp == ">=" { ratio >= t } else { ratio <= t });
        Record {
            figure,
            id: id.into(),
            title: title.into(),
            a,
            b,
            ratio,
            ratio_def: ratio_def.into(),
            target: target.map(|(c, t)| (c.to_string(), t)),
            pass,
            command: command_line(),
            notes,
        }
    }

    fn print(&self) {
        println!(
            "  [{}] {:<44} {} {:.4} {} | {} {:.4} {} | ratio {:.3} {}",
            self.figure,
            self.id,
            self.a.label,
            self.a.median,
            self.a.unit,
            self.b.label,
            self.b.median,
            self.b.unit,
            self.ratio,
            verdict(self)
        );
    }
}

fn verdict(r: &Record) -> String {
    match (&r.target, r.pass) {
        (Some((c, t)), Some(true)) => format!("(target {} {t}: pass)", sym(c)),
        (Some((c, t)), Some(false)) => format!("(target {} {t}: MISS)", sym(c)),
        _ => "(info)".to_string(),
    }
}

pub fn sym(c: &str) -> &'static str {
    if c == ">=" {
        "≥"
    } else {
        "≤"
    }
}

fn command_line() -> String {
    std::env::args()
        .map(|a| if a.contains(' ') { format!("'{a}'") } else { a })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The 1- and 5-minute load averages: above about 1 on this 2-core machine, something else
/// shared it during the measurement.
fn load_average() -> (f64, f64) {
    let s = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let mut f = s.split_whitespace().map(|v| v.parse().unwrap_or(f64::NAN));
    (f.next().unwrap_or(f64::NAN), f.next().unwrap_or(f64::NAN))
}

pub fn append(out: &Path, r: &Record) -> Res<()> {
    let mut r = r.clone();
    let (l1, l5) = load_average();
    r.notes.push(format!(
        "load average when recorded: {l1:.2} (1 min), {l5:.2} (5 min), including the benchmark itself{}",
        if l1 > 2.5 {
            " — other work was running: figures are disturbed"
        } else {
            ""
        }
    ));
    r.print();
    let mut f = OpenOptions::new()
        .create(true)
        .append(true)
        .open(out)
        .map_err(|e| format!("{}: {e}", out.display()))?;
    let line = serde_json::to_string(&r).map_err(|e| e.to_string())?;
    writeln!(f, "{line}").map_err(|e| e.to_string())
}

/// Which side goes first in repetition `rep` of a paired figure (`[true, false]`: the measured
/// side, then the reference): alternating, so neither side always runs on a warmer machine.
pub fn sides(rep: usize) -> [bool; 2] {
    if rep.is_multiple_of(2) {
        [true, false]
    } else {
        [false, true]
    }
}

pub fn median(v: &[f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

pub fn max(v: &[f64]) -> f64 {
    v.iter().cloned().fold(f64::NAN, f64::max)
}
