//! A log-log line chart as SVG (files on x, seconds on y, one line per tool),
//! written by hand: no plotting dependency for one chart.

use crate::size::human;
use std::fmt::Write;

const W: f64 = 760.0;
const H: f64 = 480.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 160.0;
const TOP: f64 = 50.0;
const BOTTOM: f64 = 60.0;
const COLORS: [&str; 6] = [
    "#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b",
];

/// Decades spanning `values` (log10 bounds, at least one decade wide).
fn decades(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::MAX, f64::MIN);
    for v in values.filter(|v| *v > 0.0) {
        lo = lo.min(v.log10().floor());
        hi = hi.max(v.log10().ceil());
    }
    if lo > hi {
        return (0.0, 1.0);
    }
    (lo, hi.max(lo + 1.0))
}

fn count_label(d: i32) -> String {
    match d {
        0..=2 => format!("{}", 10u64.pow(d as u32)),
        3..=5 => format!("{}k", 10u64.pow(d as u32 - 3)),
        _ => format!("{}M", 10u64.pow(d as u32 - 6)),
    }
}

fn seconds_label(d: i32) -> String {
    if d >= 0 {
        format!("{} s", 10u64.pow(d as u32))
    } else {
        format!("{} s", 10f64.powi(d))
    }
}

/// One tool's median time for each count (`None`: failed).
pub struct Series {
    pub tool: String,
    pub seconds: Vec<Option<f64>>,
}

/// The chart for a sweep over `counts` of `total` bytes.
pub fn loglog(counts: &[u64], series: &[Series], total: u64) -> String {
    let (x0, x1) = decades(counts.iter().map(|&c| c as f64));
    let (y0, y1) = decades(
        series
            .iter()
            .flat_map(|s| s.seconds.iter().flatten().copied()),
    );
    let pw = W - LEFT - RIGHT;
    let ph = H - TOP - BOTTOM;
    let px = |c: f64| LEFT + (c.log10() - x0) / (x1 - x0) * pw;
    let py = |t: f64| TOP + ph - (t.log10() - y0) / (y1 - y0) * ph;
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">"#
    );
    let _ = write!(s, r#"<rect width="{W}" height="{H}" fill="white"/>"#);
    let _ = write!(
        s,
        r#"<text x="{}" y="28" font-size="15" text-anchor="middle">Copying {} as N files (log-log)</text>"#,
        LEFT + pw / 2.0,
        human(total)
    );
    for d in x0 as i32..=x1 as i32 {
        let x = px(10f64.powi(d));
        let _ = write!(
            s,
            r##"<line x1="{x}" y1="{TOP}" x2="{x}" y2="{}" stroke="#ddd"/>"##,
            TOP + ph
        );
        let _ = write!(
            s,
            r#"<text x="{x}" y="{}" text-anchor="middle">{}</text>"#,
            TOP + ph + 18.0,
            count_label(d)
        );
    }
    for d in y0 as i32..=y1 as i32 {
        let y = py(10f64.powi(d));
        let _ = write!(
            s,
            r##"<line x1="{LEFT}" y1="{y}" x2="{}" y2="{y}" stroke="#ddd"/>"##,
            LEFT + pw
        );
        let _ = write!(
            s,
            r#"<text x="{}" y="{}" text-anchor="end">{}</text>"#,
            LEFT - 6.0,
            y + 4.0,
            seconds_label(d)
        );
    }
    let _ = write!(
        s,
        r##"<rect x="{LEFT}" y="{TOP}" width="{pw}" height="{ph}" fill="none" stroke="#333"/><text x="{}" y="{}" text-anchor="middle">files</text><text x="18" y="{}" text-anchor="middle" transform="rotate(-90 18 {})">seconds</text>"##,
        LEFT + pw / 2.0,
        H - 15.0,
        TOP + ph / 2.0,
        TOP + ph / 2.0
    );
    for (i, ser) in series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let points: Vec<(f64, f64)> = counts
            .iter()
            .zip(&ser.seconds)
            .filter_map(|(&c, t)| t.filter(|t| *t > 0.0).map(|t| (px(c as f64), py(t))))
            .collect();
        let path: Vec<String> = points
            .iter()
            .map(|(x, y)| format!("{x:.1},{y:.1}"))
            .collect();
        let _ = write!(
            s,
            r#"<polyline fill="none" stroke="{color}" stroke-width="2" points="{}"><title>{}</title></polyline>"#,
            path.join(" "),
            ser.tool
        );
        for (x, y) in &points {
            let _ = write!(
                s,
                r#"<circle cx="{x:.1}" cy="{y:.1}" r="3.5" fill="{color}"/>"#
            );
        }
        let ly = TOP + 20.0 + i as f64 * 22.0;
        let lx = LEFT + pw + 16.0;
        let _ = write!(
            s,
            r#"<line x1="{lx}" y1="{ly}" x2="{}" y2="{ly}" stroke="{color}" stroke-width="3"/><text x="{}" y="{}">{}</text>"#,
            lx + 24.0,
            lx + 30.0,
            ly + 4.0,
            ser.tool
        );
    }
    s.push_str("</svg>\n");
    s
}
