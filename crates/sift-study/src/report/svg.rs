//! A small SVG plotting module for the report: line plots, (stacked, grouped) bar charts and
//! box plots, each titled, with labelled axes, a legend, and a logarithmic value axis chosen
//! automatically when the values span more than [`LOG_SPAN`]. Output is self-contained SVG
//! text (no scripts, fonts or links) meant to be inlined in the HTML page.

use std::fmt::Write;

/// Values spanning more than this ratio get a logarithmic axis.
pub const LOG_SPAN: f64 = 30.0;

const WIDTH: f64 = 680.0;
const PLOT_HEIGHT: f64 = 260.0;
const LEFT: f64 = 78.0;
const RIGHT: f64 = 16.0;
const LEGEND_ROW: f64 = 18.0;

/// Escapes text for SVG/HTML.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            other => out.push(other),
        }
    }
    out
}

/// A legend entry.
#[derive(Debug, Clone, PartialEq)]
pub struct LegendEntry {
    pub name: String,
    pub colour: String,
    /// Drawn lighter (a second shade of the same configuration).
    pub light: bool,
}

/// A lighter shade of `#rrggbb` (mixed halfway with white).
pub fn lighten(colour: &str) -> String {
    let hex = colour.trim_start_matches('#');
    if hex.len() != 6 {
        return colour.to_owned();
    }
    let channel = |i: usize| u8::from_str_radix(&hex[i..i + 2], 16).unwrap_or(128);
    let mix = |c: u8| u16::from(c).midpoint(255) as u8;
    format!(
        "#{:02x}{:02x}{:02x}",
        mix(channel(0)),
        mix(channel(2)),
        mix(channel(4))
    )
}

/// A value axis: linear from 0, or logarithmic.
#[derive(Debug, Clone, Copy)]
struct Axis {
    low: f64,
    high: f64,
    log: bool,
}

impl Axis {
    fn for_values(values: &[f64], allow_log: bool, from_zero: bool) -> Axis {
        let positive: Vec<f64> = values
            .iter()
            .copied()
            .filter(|v| v.is_finite() && *v > 0.0)
            .collect();
        let max = values
            .iter()
            .copied()
            .filter(|v| v.is_finite())
            .fold(0.0_f64, f64::max);
        let min_positive = positive.iter().copied().fold(f64::INFINITY, f64::min);
        if allow_log && !positive.is_empty() && max / min_positive > LOG_SPAN {
            let low = 10_f64.powf(min_positive.log10().floor());
            let high = 10_f64.powf(max.log10().ceil());
            return Axis {
                low,
                high: if high <= low { low * 10.0 } else { high },
                log: true,
            };
        }
        let min = values
            .iter()
            .copied()
            .filter(|v| v.is_finite())
            .fold(f64::INFINITY, f64::min);
        let low = if from_zero || !min.is_finite() {
            0.0
        } else {
            nice_floor(min)
        };
        let high = if max > low { nice_ceil(max) } else { low + 1.0 };
        Axis {
            low,
            high,
            log: false,
        }
    }

    /// 0..1 position of `value`.
    fn fraction(&self, value: f64) -> f64 {
        if self.log {
            let value = value.max(self.low);
            (value.log10() - self.low.log10()) / (self.high.log10() - self.low.log10())
        } else {
            (value - self.low) / (self.high - self.low)
        }
    }

    fn ticks(&self) -> Vec<f64> {
        if self.log {
            let mut ticks = Vec::new();
            let mut tick = self.low;
            let decades = (self.high / self.low).log10().round() as i32;
            while tick <= self.high * 1.0001 {
                ticks.push(tick);
                if decades <= 2 {
                    for m in [2.0, 5.0] {
                        if tick * m < self.high {
                            ticks.push(tick * m);
                        }
                    }
                }
                tick *= 10.0;
            }
            ticks.sort_by(f64::total_cmp);
            ticks
        } else {
            let step = nice_step((self.high - self.low) / 5.0);
            let mut ticks = Vec::new();
            let mut tick = (self.low / step).ceil() * step;
            while tick <= self.high + step * 1e-9 {
                ticks.push(tick);
                tick += step;
            }
            ticks
        }
    }
}

fn nice_step(raw: f64) -> f64 {
    if raw <= 0.0 || !raw.is_finite() {
        return 1.0;
    }
    let magnitude = 10_f64.powf(raw.log10().floor());
    let normalized = raw / magnitude;
    let nice = if normalized <= 1.0 {
        1.0
    } else if normalized <= 2.0 {
        2.0
    } else if normalized <= 5.0 {
        5.0
    } else {
        10.0
    };
    nice * magnitude
}

fn nice_ceil(value: f64) -> f64 {
    let step = nice_step(value / 5.0);
    (value / step).ceil() * step
}

fn nice_floor(value: f64) -> f64 {
    if value <= 0.0 {
        return value;
    }
    let step = nice_step(value / 5.0);
    (value / step).floor() * step
}

/// A tick label: short, no trailing zeros.
pub fn format_number(value: f64) -> String {
    let magnitude = value.abs();
    if magnitude >= 1e9 {
        format!("{}G", trim(value / 1e9))
    } else if magnitude >= 1e6 {
        format!("{}M", trim(value / 1e6))
    } else if magnitude >= 1e4 {
        format!("{}k", trim(value / 1e3))
    } else {
        trim(value)
    }
}

fn trim(value: f64) -> String {
    let text = if value.abs() >= 100.0 || value.fract().abs() < 1e-9 {
        format!("{value:.0}")
    } else if value.abs() >= 1.0 {
        format!("{value:.1}")
    } else {
        format!("{value:.3}")
    };
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        text
    }
}

/// The frame common to every plot: SVG header, title, legend; returns the top of the plot
/// area.
fn header(out: &mut String, title: &str, legend: &[LegendEntry], height: f64) -> f64 {
    let _ = write!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" height="{height}" role="img" aria-label="{}" font-family="sans-serif" font-size="11">"#,
        escape(title)
    );
    let _ = write!(out, "<title>{}</title>", escape(title));
    let _ = write!(
        out,
        r##"<rect x="0" y="0" width="{WIDTH}" height="{height}" fill="#ffffff"/>"##
    );
    let _ = write!(
        out,
        r#"<text x="{}" y="18" text-anchor="middle" font-size="13" font-weight="bold">{}</text>"#,
        WIDTH / 2.0,
        escape(title)
    );
    let rows = legend_rows(legend);
    let mut y = 34.0;
    for row in &rows {
        let mut x = LEFT;
        for entry in row {
            let fill = if entry.light {
                lighten(&entry.colour)
            } else {
                entry.colour.clone()
            };
            let _ = write!(
                out,
                r#"<rect x="{x}" y="{}" width="10" height="10" fill="{fill}" stroke="{}"/><text x="{}" y="{}">{}</text>"#,
                y - 9.0,
                entry.colour,
                x + 14.0,
                y,
                escape(&entry.name)
            );
            x += legend_width(entry);
        }
        y += LEGEND_ROW;
    }
    y + 6.0
}

fn legend_width(entry: &LegendEntry) -> f64 {
    28.0 + entry.name.chars().count() as f64 * 6.2
}

fn legend_rows(legend: &[LegendEntry]) -> Vec<Vec<&LegendEntry>> {
    let mut rows: Vec<Vec<&LegendEntry>> = Vec::new();
    let mut used = 0.0;
    for entry in legend {
        let width = legend_width(entry);
        if rows.is_empty() || used + width > WIDTH - LEFT - RIGHT {
            rows.push(Vec::new());
            used = 0.0;
        }
        used += width;
        if let Some(row) = rows.last_mut() {
            row.push(entry);
        }
    }
    rows
}

fn legend_height(legend: &[LegendEntry]) -> f64 {
    legend_rows(legend).len() as f64 * LEGEND_ROW
}

/// The value axis with grid lines and its label (rotated, left).
fn value_axis(out: &mut String, axis: &Axis, top: f64, bottom: f64, label: &str) {
    for tick in axis.ticks() {
        let y = bottom - axis.fraction(tick) * (bottom - top);
        let _ = write!(
            out,
            r##"<line x1="{LEFT}" x2="{}" y1="{y:.1}" y2="{y:.1}" stroke="#e4e4e4"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
            WIDTH - RIGHT,
            LEFT - 6.0,
            y + 4.0,
            format_number(tick)
        );
    }
    let label = if axis.log {
        format!("{label}, log scale")
    } else {
        label.to_owned()
    };
    let middle = top.midpoint(bottom);
    let _ = write!(
        out,
        r#"<text x="16" y="{middle:.1}" text-anchor="middle" transform="rotate(-90 16 {middle:.1})">{}</text>"#,
        escape(&label)
    );
    let _ = write!(
        out,
        r##"<line x1="{LEFT}" x2="{LEFT}" y1="{top}" y2="{bottom}" stroke="#333"/><line x1="{LEFT}" x2="{}" y1="{bottom}" y2="{bottom}" stroke="#333"/>"##,
        WIDTH - RIGHT
    );
}

fn no_data(out: &mut String, top: f64, bottom: f64) {
    let _ = write!(
        out,
        r##"<text x="{}" y="{:.1}" text-anchor="middle" fill="#777">no data measured</text>"##,
        WIDTH / 2.0,
        top.midpoint(bottom)
    );
}

/// One line of a line plot.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub name: String,
    pub colour: String,
    pub points: Vec<(f64, f64)>,
}

/// A line plot with markers. The x axis is linear from 0 unless `x_log`.
pub fn line_plot(title: &str, x_label: &str, y_label: &str, series: &[Series]) -> String {
    let legend: Vec<LegendEntry> = series
        .iter()
        .map(|s| LegendEntry {
            name: s.name.clone(),
            colour: s.colour.clone(),
            light: false,
        })
        .collect();
    let height = 34.0 + legend_height(&legend) + 6.0 + PLOT_HEIGHT + 44.0;
    let mut out = String::new();
    let top = header(&mut out, title, &legend, height);
    let bottom = top + PLOT_HEIGHT;
    let ys: Vec<f64> = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .collect();
    let xs: Vec<f64> = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .collect();
    let y_axis = Axis::for_values(&ys, true, true);
    let x_axis = Axis::for_values(&xs, false, true);
    value_axis(&mut out, &y_axis, top, bottom, y_label);
    let plot_width = WIDTH - LEFT - RIGHT;
    for tick in x_axis.ticks() {
        let x = LEFT + x_axis.fraction(tick) * plot_width;
        let _ = write!(
            out,
            r##"<line x1="{x:.1}" x2="{x:.1}" y1="{bottom}" y2="{}" stroke="#333"/><text x="{x:.1}" y="{}" text-anchor="middle">{}</text>"##,
            bottom + 4.0,
            bottom + 16.0,
            format_number(tick)
        );
    }
    let _ = write!(
        out,
        r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#,
        LEFT + plot_width / 2.0,
        bottom + 34.0,
        escape(x_label)
    );
    if ys.is_empty() {
        no_data(&mut out, top, bottom);
    }
    for s in series {
        let points: Vec<String> = s
            .points
            .iter()
            .map(|(x, y)| {
                format!(
                    "{:.1},{:.1}",
                    LEFT + x_axis.fraction(*x) * plot_width,
                    bottom - y_axis.fraction(*y).clamp(0.0, 1.0) * PLOT_HEIGHT
                )
            })
            .collect();
        if points.len() > 1 {
            let _ = write!(
                out,
                r#"<polyline fill="none" stroke="{}" stroke-width="1.8" points="{}"/>"#,
                s.colour,
                points.join(" ")
            );
        }
        for (point, (x, y)) in points.iter().zip(&s.points) {
            if let Some((px, py)) = point.split_once(',') {
                let _ = write!(
                    out,
                    r#"<circle cx="{px}" cy="{py}" r="2.6" fill="{}"><title>{}: x {} y {}</title></circle>"#,
                    s.colour,
                    escape(&s.name),
                    format_number(*x),
                    format_number(*y)
                );
            }
        }
    }
    out.push_str("</svg>");
    out
}

/// One segment of a stacked bar.
#[derive(Debug, Clone, PartialEq)]
pub struct Segment {
    pub value: f64,
    pub colour: String,
    pub light: bool,
    pub label: String,
}

/// One bar (one or more stacked segments).
#[derive(Debug, Clone, PartialEq)]
pub struct Bar {
    pub name: String,
    pub segments: Vec<Segment>,
}

/// A group of bars sharing a label on the category axis.
#[derive(Debug, Clone, PartialEq)]
pub struct BarGroup {
    pub label: String,
    pub bars: Vec<Bar>,
}

/// Approximate width of `text` at the plots' font size.
fn text_width(text: &str) -> f64 {
    text.chars().count() as f64 * 6.0
}

/// Extra height below the plot for category labels: none when they fit side by side,
/// otherwise room for labels slanted at 35°.
fn label_room(labels: &[&str]) -> f64 {
    let group_width = (WIDTH - LEFT - RIGHT) / labels.len().max(1) as f64;
    let widest = labels.iter().map(|l| text_width(l)).fold(0.0, f64::max);
    if widest <= group_width * 0.95 {
        0.0
    } else {
        widest * 0.574
    }
}

/// Category labels under the plot, slanted when `room` says they do not fit.
fn group_labels(out: &mut String, labels: &[(f64, &str)], bottom: f64, room: f64) {
    for (x, label) in labels {
        if room > 0.0 {
            let y = bottom + 12.0;
            let _ = write!(
                out,
                r#"<text x="{x:.1}" y="{y:.1}" text-anchor="end" transform="rotate(-35 {x:.1} {y:.1})">{}</text>"#,
                escape(label)
            );
        } else {
            let _ = write!(
                out,
                r#"<text x="{x:.1}" y="{}" text-anchor="middle">{}</text>"#,
                bottom + 16.0,
                escape(label)
            );
        }
    }
}

/// A grouped bar chart; bars with several segments are stacked (then the axis is linear).
pub fn bar_chart(
    title: &str,
    y_label: &str,
    x_label: &str,
    groups: &[BarGroup],
    legend: &[LegendEntry],
) -> String {
    let room = label_room(&groups.iter().map(|g| g.label.as_str()).collect::<Vec<_>>());
    let height = 34.0 + legend_height(legend) + 6.0 + PLOT_HEIGHT + 44.0 + room;
    let mut out = String::new();
    let top = header(&mut out, title, legend, height);
    let bottom = top + PLOT_HEIGHT;
    let stacked = groups
        .iter()
        .any(|g| g.bars.iter().any(|b| b.segments.len() > 1));
    let totals: Vec<f64> = groups
        .iter()
        .flat_map(|g| {
            g.bars
                .iter()
                .map(|b| b.segments.iter().map(|s| s.value).sum())
        })
        .collect();
    let axis = Axis::for_values(&totals, !stacked, true);
    value_axis(&mut out, &axis, top, bottom, y_label);
    let plot_width = WIDTH - LEFT - RIGHT;
    let group_width = plot_width / groups.len().max(1) as f64;
    let mut labels = Vec::new();
    if totals.is_empty() {
        no_data(&mut out, top, bottom);
    }
    for (position, group) in groups.iter().enumerate() {
        let start = LEFT + position as f64 * group_width;
        let bar_width = (group_width * 0.8) / group.bars.len().max(1) as f64;
        for (index, bar) in group.bars.iter().enumerate() {
            let x = start + group_width * 0.1 + index as f64 * bar_width;
            let mut base = axis.low;
            for segment in &bar.segments {
                let y_low = bottom - axis.fraction(base).clamp(0.0, 1.0) * PLOT_HEIGHT;
                let y_high =
                    bottom - axis.fraction(base + segment.value).clamp(0.0, 1.0) * PLOT_HEIGHT;
                let fill = if segment.light {
                    lighten(&segment.colour)
                } else {
                    segment.colour.clone()
                };
                let _ = write!(
                    out,
                    r#"<rect x="{x:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{fill}" stroke="{}" stroke-width="0.6"><title>{} {}: {}</title></rect>"#,
                    y_high,
                    (bar_width - 1.0).max(1.0),
                    (y_low - y_high).max(0.0),
                    segment.colour,
                    escape(&bar.name),
                    escape(&segment.label),
                    format_number(segment.value)
                );
                base += segment.value;
            }
        }
        labels.push((start + group_width / 2.0, group.label.as_str()));
    }
    group_labels(&mut out, &labels, bottom, room);
    let _ = write!(
        out,
        r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#,
        LEFT + plot_width / 2.0,
        bottom + 34.0 + room,
        escape(x_label)
    );
    out.push_str("</svg>");
    out
}

/// The five numbers of one box: whiskers at p5 and p95, box from p25 to p75, line at the
/// median.
#[derive(Debug, Clone, PartialEq)]
pub struct BoxStats {
    pub name: String,
    pub colour: String,
    pub p5: f64,
    pub p25: f64,
    pub p50: f64,
    pub p75: f64,
    pub p95: f64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct BoxGroup {
    pub label: String,
    pub boxes: Vec<BoxStats>,
}

/// Box plots grouped by category.
pub fn box_plot(
    title: &str,
    y_label: &str,
    x_label: &str,
    groups: &[BoxGroup],
    legend: &[LegendEntry],
) -> String {
    let room = label_room(&groups.iter().map(|g| g.label.as_str()).collect::<Vec<_>>());
    let height = 34.0 + legend_height(legend) + 6.0 + PLOT_HEIGHT + 44.0 + room;
    let mut out = String::new();
    let top = header(&mut out, title, legend, height);
    let bottom = top + PLOT_HEIGHT;
    let values: Vec<f64> = groups
        .iter()
        .flat_map(|g| g.boxes.iter().flat_map(|b| [b.p5, b.p95]))
        .collect();
    let axis = Axis::for_values(&values, true, false);
    value_axis(&mut out, &axis, top, bottom, y_label);
    let plot_width = WIDTH - LEFT - RIGHT;
    let group_width = plot_width / groups.len().max(1) as f64;
    let mut labels = Vec::new();
    if values.is_empty() {
        no_data(&mut out, top, bottom);
    }
    let y = |value: f64| bottom - axis.fraction(value).clamp(0.0, 1.0) * PLOT_HEIGHT;
    for (position, group) in groups.iter().enumerate() {
        let start = LEFT + position as f64 * group_width;
        let slot = (group_width * 0.84) / group.boxes.len().max(1) as f64;
        for (index, b) in group.boxes.iter().enumerate() {
            let x = start + group_width * 0.08 + index as f64 * slot;
            let middle = x + slot / 2.0;
            let half = (slot * 0.35).max(1.5);
            let _ = write!(
                out,
                r##"<g><title>{}: p5 {} p25 {} median {} p75 {} p95 {} µs</title><line x1="{middle:.1}" x2="{middle:.1}" y1="{:.1}" y2="{:.1}" stroke="{c}"/><line x1="{:.1}" x2="{:.1}" y1="{:.1}" y2="{:.1}" stroke="{c}"/><line x1="{:.1}" x2="{:.1}" y1="{:.1}" y2="{:.1}" stroke="{c}"/><rect x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{}" stroke="{c}"/><line x1="{:.1}" x2="{:.1}" y1="{:.1}" y2="{:.1}" stroke="#000" stroke-width="2"/></g>"##,
                escape(&b.name),
                format_number(b.p5),
                format_number(b.p25),
                format_number(b.p50),
                format_number(b.p75),
                format_number(b.p95),
                y(b.p95),
                y(b.p5),
                middle - half / 2.0,
                middle + half / 2.0,
                y(b.p95),
                y(b.p95),
                middle - half / 2.0,
                middle + half / 2.0,
                y(b.p5),
                y(b.p5),
                middle - half,
                y(b.p75),
                half * 2.0,
                (y(b.p25) - y(b.p75)).max(1.0),
                lighten(&b.colour),
                middle - half,
                middle + half,
                y(b.p50),
                y(b.p50),
                c = b.colour,
            );
        }
        labels.push((start + group_width / 2.0, group.label.as_str()));
    }
    group_labels(&mut out, &labels, bottom, room);
    let _ = write!(
        out,
        r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#,
        LEFT + plot_width / 2.0,
        bottom + 34.0 + room,
        escape(x_label)
    );
    out.push_str("</svg>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_axis_when_values_span_orders_of_magnitude() {
        let axis = Axis::for_values(&[2.0, 5000.0], true, true);
        assert!(axis.log);
        assert_eq!((axis.low, axis.high), (1.0, 10_000.0));
        assert_eq!(axis.ticks(), vec![1.0, 10.0, 100.0, 1000.0, 10_000.0]);
        let linear = Axis::for_values(&[2.0, 50.0], true, true);
        assert!(!linear.log);
        assert_eq!((linear.low, linear.high), (0.0, 50.0));
        assert!((linear.fraction(25.0) - 0.5).abs() < 1e-9);
    }

    #[test]
    fn plots_are_titled_escaped_and_contain_marks() {
        let svg = line_plot(
            "PUT <throughput>",
            "documents loaded",
            "ops/s",
            &[Series {
                name: "lazy".into(),
                colour: "#0072b2".into(),
                points: vec![(1.0, 10.0), (2.0, 20.0)],
            }],
        );
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"));
        assert!(svg.contains("PUT &lt;throughput&gt;"));
        assert!(svg.contains("<polyline") && svg.contains("documents loaded"));
        let boxes = box_plot(
            "latency",
            "µs",
            "top-K",
            &[BoxGroup {
                label: "10".into(),
                boxes: vec![BoxStats {
                    name: "lazy".into(),
                    colour: "#0072b2".into(),
                    p5: 1.0,
                    p25: 2.0,
                    p50: 3.0,
                    p75: 4.0,
                    p95: 500.0,
                }],
            }],
            &[],
        );
        assert!(boxes.contains("<rect") && boxes.contains("log scale"));
        assert!(label_room(&["a", "b"]).abs() < 1e-9);
        let long = "composite:sync-insert, a long label";
        assert!(label_room(&[long; 12]) > 100.0);
        let empty = bar_chart("nothing", "MiB", "configuration", &[], &[]);
        assert!(empty.contains("no data measured"));
        assert_eq!(lighten("#000000"), "#7f7f7f");
        assert_eq!(format_number(25_000.0), "25k");
        assert_eq!(format_number(0.5), "0.5");
    }
}
