//! The report's plots, drawn with `plotters` into inline SVG: line plots, (stacked, grouped) bar
//! charts and box plots, each titled, with labelled axes and a legend above the plot, and a
//! logarithmic value axis chosen when the values span more than [`LOG_SPAN`]. Output is
//! self-contained SVG text (no scripts, fonts or links) meant to be inlined in the HTML page.
//!
//! What stays here is the report's policy (sizes, the legend's rows, when an axis is
//! logarithmic, category labels, the five numbers of a box); axes, ticks, scales and the SVG
//! itself are `plotters`'. Its SVG has no per-mark tooltips: the table under each figure holds
//! every number.

use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// Values spanning more than this ratio get a logarithmic axis.
pub const LOG_SPAN: f64 = 30.0;

const WIDTH: u32 = 680;
const PLOT_HEIGHT: u32 = 260;
const LEFT: u32 = 78;
const RIGHT: u32 = 16;
const TITLE_HEIGHT: u32 = 28;
const LEGEND_ROW: u32 = 18;
const FONT: &str = "sans-serif";
/// Font sizes as `plotters` takes them (its SVG writes 0.8 of them as pixels: 11 px, 13 px).
const LABEL_SIZE: f64 = 13.6;
const TITLE_SIZE: f64 = 16.1;

type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;
type Drawn = Result<(), String>;
/// What a plot draws, handed the function that puts one mark on its chart.
type Marks<'a> = dyn Fn(&mut dyn FnMut(Mark) -> Drawn) -> Drawn + 'a;

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
    let (r, g, b) = channels(colour);
    let mix = |c: u8| u16::from(c).midpoint(255) as u8;
    format!("#{:02x}{:02x}{:02x}", mix(r), mix(g), mix(b))
}

/// The channels of `#rrggbb` (grey for anything else).
fn channels(colour: &str) -> (u8, u8, u8) {
    let hex = colour.trim_start_matches('#');
    let channel = |i: usize| {
        hex.get(i..i + 2)
            .and_then(|pair| u8::from_str_radix(pair, 16).ok())
            .unwrap_or(128)
    };
    if hex.len() == 6 {
        (channel(0), channel(2), channel(4))
    } else {
        (128, 128, 128)
    }
}

fn rgb(colour: &str) -> RGBColor {
    let (r, g, b) = channels(colour);
    RGBColor(r, g, b)
}

/// How the value axis runs: linear from `low`, or logarithmic over whole decades.
#[derive(Debug, Clone, Copy)]
struct Axis {
    low: f64,
    high: f64,
    log: bool,
}

impl Axis {
    fn for_values(values: &[f64], allow_log: bool, from_zero: bool) -> Axis {
        let finite = || values.iter().copied().filter(|v| v.is_finite());
        let max = finite().fold(0.0_f64, f64::max);
        let min_positive = finite().filter(|v| *v > 0.0).fold(f64::INFINITY, f64::min);
        if allow_log && min_positive.is_finite() && max / min_positive > LOG_SPAN {
            let low = 10_f64.powf(min_positive.log10().floor());
            let high = 10_f64.powf(max.log10().ceil());
            return Axis {
                low,
                high: if high <= low { low * 10.0 } else { high },
                log: true,
            };
        }
        let min = finite().fold(f64::INFINITY, f64::min);
        let low = if from_zero || !min.is_finite() || min <= 0.0 {
            0.0
        } else {
            // Some room under the lowest box; the ticks are plotters'.
            min * 0.9
        };
        let high = if max > low { max * 1.05 } else { low + 1.0 };
        Axis {
            low,
            high,
            log: false,
        }
    }

    fn label(&self, label: &str) -> String {
        if self.log {
            format!("{label}, log scale")
        } else {
            label.to_owned()
        }
    }
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

fn legend_width(entry: &LegendEntry) -> u32 {
    28 + entry.name.chars().count() as u32 * 6
}

fn legend_rows(legend: &[LegendEntry]) -> Vec<Vec<&LegendEntry>> {
    let mut rows: Vec<Vec<&LegendEntry>> = Vec::new();
    let mut used = 0;
    for entry in legend {
        let width = legend_width(entry);
        if rows.is_empty() || used + width > WIDTH - LEFT - RIGHT {
            rows.push(Vec::new());
            used = 0;
        }
        used += width;
        if let Some(row) = rows.last_mut() {
            row.push(entry);
        }
    }
    rows
}

fn legend_height(legend: &[LegendEntry]) -> u32 {
    legend_rows(legend).len() as u32 * LEGEND_ROW
}

/// Approximate width of `text` at the plots' font size.
fn text_width(text: &str) -> u32 {
    text.chars().count() as u32 * 6
}

/// Extra height below the plot for category labels: none when they fit side by side,
/// otherwise room for them turned upright.
fn label_room(labels: &[&str]) -> u32 {
    let group_width = (WIDTH - LEFT - RIGHT) / labels.len().max(1) as u32;
    let widest = labels.iter().map(|l| text_width(l)).max().unwrap_or(0);
    if widest * 20 <= group_width * 19 {
        0
    } else {
        widest
    }
}

/// An SVG of the plot that `draw` makes in a frame of `height` pixels with a title and a
/// legend: `draw` gets the area under the legend.
fn render(
    title: &str,
    legend: &[LegendEntry],
    height: u32,
    draw: impl FnOnce(&Area<'_>) -> Drawn,
) -> String {
    let mut svg = String::new();
    let drawn = {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, height)).into_drawing_area();
        frame(&root, title, legend)
            .and_then(|plot| draw(&plot))
            .and_then(|()| root.present().map_err(|e| e.to_string()))
    };
    match drawn {
        Ok(()) => svg.trim_end().to_owned(),
        // A plot that cannot be drawn is a bug; the page still says which.
        Err(error) => format!(
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="40"><text x="8" y="24">{}: {}</text></svg>"#,
            escape(title),
            escape(&error)
        ),
    }
}

/// White background, the title, the legend rows; returns the area below them.
fn frame<'a>(root: &Area<'a>, title: &str, legend: &[LegendEntry]) -> Result<Area<'a>, String> {
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let (head, rest) = root.split_vertically(TITLE_HEIGHT);
    head.draw(&Text::new(
        title.to_owned(),
        (WIDTH as i32 / 2, 8),
        TextStyle::from((FONT, TITLE_SIZE).into_font().style(FontStyle::Bold))
            .pos(Pos::new(HPos::Center, VPos::Top)),
    ))
    .map_err(|e| e.to_string())?;
    let (legend_area, plot) = rest.split_vertically(legend_height(legend) + 6);
    for (row_number, row) in legend_rows(legend).iter().enumerate() {
        let y = row_number as i32 * LEGEND_ROW as i32 + 2;
        let mut x = LEFT as i32;
        for entry in row {
            let fill = if entry.light {
                rgb(&lighten(&entry.colour))
            } else {
                rgb(&entry.colour)
            };
            legend_area
                .draw(&Rectangle::new([(x, y), (x + 10, y + 10)], fill.filled()))
                .and_then(|()| {
                    legend_area.draw(&Rectangle::new(
                        [(x, y), (x + 10, y + 10)],
                        rgb(&entry.colour),
                    ))
                })
                .and_then(|()| {
                    legend_area.draw(&Text::new(
                        entry.name.clone(),
                        (x + 14, y),
                        (FONT, LABEL_SIZE).into_font(),
                    ))
                })
                .map_err(|e| e.to_string())?;
            x += legend_width(entry) as i32;
        }
    }
    Ok(plot)
}

/// What the axes of one plot say.
struct Axes<'a> {
    x_label: &'a str,
    y_label: String,
    /// Room under the plot for the x labels.
    x_label_room: u32,
    /// Category names at x = 0, 1, …; none: numbers.
    categories: Option<&'a [&'a str]>,
    empty: bool,
}

/// Builds the chart over `x` and `y` in `area`, draws its mesh and labels, then `marks`.
fn with_axes<Y>(
    area: &Area<'_>,
    x: std::ops::Range<f64>,
    y: Y,
    axes: &Axes<'_>,
    marks: impl FnOnce(
        &mut ChartContext<'_, SVGBackend<'_>, Cartesian2d<RangedCoordf64, Y::CoordDescType>>,
    ) -> Drawn,
) -> Drawn
where
    Y: AsRangedCoord<Value = f64>,
    Y::CoordDescType: ValueFormatter<f64>,
{
    let mut chart = ChartBuilder::on(area)
        .margin_right(RIGHT)
        .x_label_area_size(axes.x_label_room + 36)
        .y_label_area_size(LEFT)
        .build_cartesian_2d(x, y)
        .map_err(|e| e.to_string())?;
    let mut mesh = chart.configure_mesh();
    // `label_style` sets both axes' labels.
    mesh.label_style((FONT, LABEL_SIZE))
        .x_desc(axes.x_label)
        .y_desc(axes.y_label.as_str())
        .x_label_formatter(&|x: &f64| format_number(*x))
        .y_label_formatter(&|y: &f64| format_number(*y))
        .axis_desc_style((FONT, LABEL_SIZE))
        .max_light_lines(0)
        .bold_line_style(RGBColor(228, 228, 228));
    if axes.categories.is_some() {
        // Category names are drawn below, under each group's centre.
        mesh.disable_x_mesh().x_labels(0);
    }
    mesh.draw().map_err(|e| e.to_string())?;
    if let Some(names) = axes.categories {
        category_labels(area, &chart, names, axes.x_label_room > 0)?;
    }
    if axes.empty {
        let (x_range, y_range) = (chart.x_range(), chart.y_range());
        let centre = (
            x_range.start.midpoint(x_range.end),
            y_range.start.midpoint(y_range.end),
        );
        chart
            .draw_series(std::iter::once(Text::new(
                "no data measured",
                centre,
                (FONT, LABEL_SIZE)
                    .into_font()
                    .color(&RGBColor(119, 119, 119))
                    .pos(Pos::new(HPos::Center, VPos::Center)),
            )))
            .map_err(|e| e.to_string())?;
    }
    marks(&mut chart)
}

/// The category names under the plot, one under each group's centre (x = 0, 1, …); turned
/// upright, ending at the axis, when they do not fit side by side. Drawn on `area` itself, since
/// `plotters` centres its own tick labels (a turned label would run into the plot).
fn category_labels<Y: Ranged<ValueType = f64>>(
    area: &Area<'_>,
    chart: &ChartContext<'_, SVGBackend<'_>, Cartesian2d<RangedCoordf64, Y>>,
    names: &[&str],
    turned: bool,
) -> Drawn {
    let bottom = chart.y_range().start;
    let (base_x, base_y) = area.get_base_pixel();
    for (index, name) in names.iter().enumerate() {
        let (x, y) = chart.backend_coord(&(index as f64, bottom));
        let (x, y) = (x - base_x, y - base_y + 6);
        let style = if turned {
            TextStyle::from(
                (FONT, LABEL_SIZE)
                    .into_font()
                    .transform(FontTransform::Rotate270),
            )
            .pos(Pos::new(HPos::Right, VPos::Center))
        } else {
            TextStyle::from((FONT, LABEL_SIZE).into_font()).pos(Pos::new(HPos::Center, VPos::Top))
        };
        area.draw(&Text::new((*name).to_owned(), (x, y), style))
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// `with_axes` on a linear or logarithmic value axis, as `axis` says.
fn on_axis(
    area: &Area<'_>,
    x: std::ops::Range<f64>,
    axis: Axis,
    axes: &Axes<'_>,
    marks: &Marks<'_>,
) -> Drawn {
    if axis.log {
        with_axes(area, x, (axis.low..axis.high).log_scale(), axes, |chart| {
            marks(&mut |mark| mark.draw_on(chart))
        })
    } else {
        with_axes(area, x, axis.low..axis.high, axes, |chart| {
            marks(&mut |mark| mark.draw_on(chart))
        })
    }
}

/// One thing drawn in data coordinates.
enum Mark {
    Line {
        points: Vec<(f64, f64)>,
        colour: RGBColor,
    },
    Dot {
        at: (f64, f64),
        colour: RGBColor,
    },
    Block {
        corners: [(f64, f64); 2],
        fill: RGBColor,
        edge: RGBColor,
    },
    Stroke {
        points: Vec<(f64, f64)>,
        colour: RGBColor,
        width: u32,
    },
}

impl Mark {
    fn draw_on<Y: Ranged<ValueType = f64>>(
        self,
        chart: &mut ChartContext<'_, SVGBackend<'_>, Cartesian2d<RangedCoordf64, Y>>,
    ) -> Drawn {
        let drawn = match self {
            Mark::Line { points, colour } => chart
                .draw_series(LineSeries::new(points, colour.stroke_width(2)))
                .map(|_| ()),
            Mark::Dot { at, colour } => chart
                .draw_series(std::iter::once(Circle::new(at, 3, colour.filled())))
                .map(|_| ()),
            Mark::Block {
                corners,
                fill,
                edge,
            } => chart
                .draw_series([
                    Rectangle::new(corners, fill.filled()),
                    Rectangle::new(corners, edge),
                ])
                .map(|_| ()),
            Mark::Stroke {
                points,
                colour,
                width,
            } => chart
                .draw_series(std::iter::once(PathElement::new(
                    points,
                    colour.stroke_width(width),
                )))
                .map(|_| ()),
        };
        drawn.map_err(|e| e.to_string())
    }
}

/// One line of a line plot.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub name: String,
    pub colour: String,
    pub points: Vec<(f64, f64)>,
}

/// A line plot with markers; the x axis is linear from 0.
pub fn line_plot(title: &str, x_label: &str, y_label: &str, series: &[Series]) -> String {
    let legend: Vec<LegendEntry> = series
        .iter()
        .map(|s| LegendEntry {
            name: s.name.clone(),
            colour: s.colour.clone(),
            light: false,
        })
        .collect();
    let points = || series.iter().flat_map(|s| s.points.iter());
    let ys: Vec<f64> = points().map(|p| p.1).collect();
    let x_max = points().map(|p| p.0).fold(0.0_f64, f64::max);
    let axis = Axis::for_values(&ys, true, true);
    let axes = Axes {
        x_label,
        y_label: axis.label(y_label),
        x_label_room: 0,
        categories: None,
        empty: ys.is_empty(),
    };
    let height = plot_height(&legend, 0);
    render(title, &legend, height, |area| {
        let x_high = if x_max > 0.0 { x_max * 1.02 } else { 1.0 };
        on_axis(area, 0.0..x_high, axis, &axes, &|draw| {
            for s in series {
                let colour = rgb(&s.colour);
                let points: Vec<(f64, f64)> = s
                    .points
                    .iter()
                    .map(|&(x, y)| (x, if axis.log { y.max(axis.low) } else { y }))
                    .collect();
                if points.len() > 1 {
                    draw(Mark::Line {
                        points: points.clone(),
                        colour,
                    })?;
                }
                for at in points {
                    draw(Mark::Dot { at, colour })?;
                }
            }
            Ok(())
        })
    })
}

fn plot_height(legend: &[LegendEntry], room: u32) -> u32 {
    TITLE_HEIGHT + legend_height(legend) + 6 + PLOT_HEIGHT + 44 + room
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

/// A grouped bar chart; bars with several segments are stacked (then the axis is linear).
pub fn bar_chart(
    title: &str,
    y_label: &str,
    x_label: &str,
    groups: &[BarGroup],
    legend: &[LegendEntry],
) -> String {
    let labels: Vec<&str> = groups.iter().map(|g| g.label.as_str()).collect();
    let room = label_room(&labels);
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
    let axes = Axes {
        x_label,
        y_label: axis.label(y_label),
        x_label_room: room,
        categories: Some(&labels),
        empty: totals.is_empty(),
    };
    render(title, legend, plot_height(legend, room), |area| {
        let x = -0.5..(groups.len().max(1) as f64 - 0.5);
        on_axis(area, x, axis, &axes, &|draw| {
            for (position, group) in groups.iter().enumerate() {
                let width = 0.8 / group.bars.len().max(1) as f64;
                for (index, bar) in group.bars.iter().enumerate() {
                    let left = position as f64 - 0.4 + index as f64 * width;
                    let mut base = axis.low;
                    for segment in &bar.segments {
                        let fill = if segment.light {
                            rgb(&lighten(&segment.colour))
                        } else {
                            rgb(&segment.colour)
                        };
                        let top = (base + segment.value).max(axis.low);
                        draw(Mark::Block {
                            corners: [(left, base), (left + width * 0.95, top)],
                            fill,
                            edge: rgb(&segment.colour),
                        })?;
                        base = top;
                    }
                }
            }
            Ok(())
        })
    })
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
    let labels: Vec<&str> = groups.iter().map(|g| g.label.as_str()).collect();
    let room = label_room(&labels);
    let values: Vec<f64> = groups
        .iter()
        .flat_map(|g| g.boxes.iter().flat_map(|b| [b.p5, b.p95]))
        .collect();
    let axis = Axis::for_values(&values, true, false);
    let axes = Axes {
        x_label,
        y_label: axis.label(y_label),
        x_label_room: room,
        categories: Some(&labels),
        empty: values.is_empty(),
    };
    render(title, legend, plot_height(legend, room), |area| {
        let x = -0.5..(groups.len().max(1) as f64 - 0.5);
        on_axis(area, x, axis, &axes, &|draw| {
            let y = |value: f64| value.max(axis.low);
            for (position, group) in groups.iter().enumerate() {
                let slot = 0.84 / group.boxes.len().max(1) as f64;
                for (index, b) in group.boxes.iter().enumerate() {
                    let middle = position as f64 - 0.42 + (index as f64 + 0.5) * slot;
                    let half = slot * 0.35;
                    let colour = rgb(&b.colour);
                    let stroke =
                        |points: Vec<(f64, f64)>, colour: RGBColor, width: u32| Mark::Stroke {
                            points,
                            colour,
                            width,
                        };
                    draw(stroke(
                        vec![(middle, y(b.p5)), (middle, y(b.p95))],
                        colour,
                        1,
                    ))?;
                    for whisker in [b.p5, b.p95] {
                        draw(stroke(
                            vec![
                                (middle - half / 2.0, y(whisker)),
                                (middle + half / 2.0, y(whisker)),
                            ],
                            colour,
                            1,
                        ))?;
                    }
                    draw(Mark::Block {
                        corners: [(middle - half, y(b.p25)), (middle + half, y(b.p75))],
                        fill: rgb(&lighten(&b.colour)),
                        edge: colour,
                    })?;
                    draw(stroke(
                        vec![(middle - half, y(b.p50)), (middle + half, y(b.p50))],
                        BLACK,
                        2,
                    ))?;
                }
            }
            Ok(())
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_axis_when_values_span_orders_of_magnitude() {
        let axis = Axis::for_values(&[2.0, 5000.0], true, true);
        assert!(axis.log);
        assert_eq!((axis.low, axis.high), (1.0, 10_000.0));
        let linear = Axis::for_values(&[2.0, 50.0], true, true);
        assert!(!linear.log);
        assert!(linear.low == 0.0 && linear.high >= 50.0);
        let not_allowed = Axis::for_values(&[2.0, 5000.0], false, true);
        assert!(!not_allowed.log);
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
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"), "{svg}");
        assert!(svg.contains("PUT &lt;throughput&gt;"));
        assert!(svg.contains("<polyline") && svg.contains("<circle"));
        assert!(svg.contains("documents loaded") && svg.contains("lazy"));
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
        assert!(
            boxes.contains("<rect") && boxes.contains("log scale"),
            "{boxes}"
        );
        assert_eq!(label_room(&["a", "b"]), 0);
        let long = "composite:sync-insert, a long label";
        assert!(label_room(&[long; 12]) > 100);
        let bars = bar_chart(
            "size",
            "MiB",
            "configuration",
            &[BarGroup {
                label: "lazy".into(),
                bars: vec![Bar {
                    name: "lazy".into(),
                    segments: vec![Segment {
                        value: 3.0,
                        colour: "#0072b2".into(),
                        light: false,
                        label: "primary".into(),
                    }],
                }],
            }],
            &[],
        );
        assert!(bars.contains("<rect") && bars.contains("lazy"), "{bars}");
        let empty = bar_chart("nothing", "MiB", "configuration", &[], &[]);
        assert!(empty.contains("no data measured"), "{empty}");
        assert_eq!(lighten("#000000"), "#7f7f7f");
        assert_eq!(format_number(25_000.0), "25k");
        assert_eq!(format_number(0.5), "0.5");
    }
}
