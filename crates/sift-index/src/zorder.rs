//! The Z-order (Morton) code of geo points: longitude and latitude quantised to 2^32 cells
//! each, their bits interleaved; and the rectangle a code prefix covers. A geo value's
//! encoding starts with this code (`encoding.rs`, `docs/format/index-encodings.md`).

/// Quantisation steps per axis for the Z-order code: 2^32.
const GEO_CELLS_PER_AXIS: f64 = 4_294_967_296.0;

/// Longitude quantised to one of 2^32 equal cells over -180..=180 (180 itself falls in the last
/// cell). The result always satisfies `lon_of_cell(q) <= lon < lon_of_cell(q + 1)` (or `q` is
/// the last cell), even where float rounding would say otherwise.
pub fn quantize_lon(lon: f64) -> u32 {
    quantize(lon, -180.0, 360.0)
}

/// Latitude quantised to one of 2^32 equal cells over -90..=90.
pub fn quantize_lat(lat: f64) -> u32 {
    quantize(lat, -90.0, 180.0)
}

/// The lower edge, in degrees, of longitude cell `cell` (may be 2^32 for the upper edge of the
/// last cell).
pub fn lon_of_cell(cell: u64) -> f64 {
    cell_edge(cell, -180.0, 360.0)
}

/// The lower edge, in degrees, of latitude cell `cell` (may be 2^32).
pub fn lat_of_cell(cell: u64) -> f64 {
    cell_edge(cell, -90.0, 180.0)
}

fn cell_edge(cell: u64, min: f64, span: f64) -> f64 {
    min + (cell as f64) / GEO_CELLS_PER_AXIS * span
}

fn quantize(x: f64, min: f64, span: f64) -> u32 {
    if x.is_nan() || x <= min {
        return 0;
    }
    let estimate = ((x - min) / span * GEO_CELLS_PER_AXIS).floor();
    let mut cell = if estimate >= GEO_CELLS_PER_AXIS - 1.0 {
        u64::from(u32::MAX)
    } else {
        estimate as u64
    };
    // Make the cell agree exactly with `cell_edge`, which spatial queries use for the inverse.
    while cell > 0 && cell_edge(cell, min, span) > x {
        cell -= 1;
    }
    while cell < u64::from(u32::MAX) && cell_edge(cell + 1, min, span) <= x {
        cell += 1;
    }
    cell as u32
}

/// Spreads the 32 bits of `x` to the even bit positions of a u64.
pub fn spread_bits(x: u32) -> u64 {
    let mut v = u64::from(x);
    v = (v | (v << 16)) & 0x0000_FFFF_0000_FFFF;
    v = (v | (v << 8)) & 0x00FF_00FF_00FF_00FF;
    v = (v | (v << 4)) & 0x0F0F_0F0F_0F0F_0F0F;
    v = (v | (v << 2)) & 0x3333_3333_3333_3333;
    v = (v | (v << 1)) & 0x5555_5555_5555_5555;
    v
}

/// Inverse of [`spread_bits`]: gathers the even bit positions of `v`.
pub fn gather_bits(v: u64) -> u32 {
    let mut v = v & 0x5555_5555_5555_5555;
    v = (v | (v >> 1)) & 0x3333_3333_3333_3333;
    v = (v | (v >> 2)) & 0x0F0F_0F0F_0F0F_0F0F;
    v = (v | (v >> 4)) & 0x00FF_00FF_00FF_00FF;
    v = (v | (v >> 8)) & 0x0000_FFFF_0000_FFFF;
    v = (v | (v >> 16)) & 0x0000_0000_FFFF_FFFF;
    v as u32
}

/// The Z-order (Morton) code of a point: quantised latitude bits at the odd positions,
/// quantised longitude bits at the even positions (bit 63 is the latitude's top bit).
/// Nearby points mostly share long prefixes; the order is Z-order, not distance.
pub fn zorder(lon: f64, lat: f64) -> u64 {
    (spread_bits(quantize_lat(lat)) << 1) | spread_bits(quantize_lon(lon))
}

/// A longitude/latitude rectangle in degrees: `lon_min <= lon < lon_max` and
/// `lat_min <= lat < lat_max`, except that an upper edge of 180 (lon) or 90 (lat) is inclusive.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GeoCell {
    /// West edge, degrees.
    pub lon_min: f64,
    /// East edge, degrees.
    pub lon_max: f64,
    /// South edge, degrees.
    pub lat_min: f64,
    /// North edge, degrees.
    pub lat_max: f64,
}

impl GeoCell {
    /// Whether the point lies in the cell (see the edges above).
    pub fn contains(&self, lon: f64, lat: f64) -> bool {
        let lon_inside =
            self.lon_min <= lon && (lon < self.lon_max || (self.lon_max >= 180.0 && lon <= 180.0));
        let lat_inside =
            self.lat_min <= lat && (lat < self.lat_max || (self.lat_max >= 90.0 && lat <= 90.0));
        lon_inside && lat_inside
    }
}

/// The rectangle covered by all Z-order codes that share the top `prefix_bits` bits of `code`
/// (0..=64; larger values count as 64). With 64 it is the single quantisation cell of `code`;
/// with an even count `2k` it is a quadtree cell of depth `k`; with an odd count the cell is
/// split in latitude only. Every code in `[code_min, code_max]` of that prefix — and so every
/// point whose geo encoding starts with such a code — lies inside it.
pub fn zorder_cell(code: u64, prefix_bits: u32) -> GeoCell {
    let free_bits = 64 - prefix_bits.min(64);
    let free_mask = if free_bits == 64 {
        u64::MAX
    } else {
        (1u64 << free_bits) - 1
    };
    let low = code & !free_mask;
    let high = code | free_mask;
    let lon_low = gather_bits(low);
    let lon_high = gather_bits(high);
    let lat_low = gather_bits(low >> 1);
    let lat_high = gather_bits(high >> 1);
    GeoCell {
        lon_min: lon_of_cell(u64::from(lon_low)),
        lon_max: lon_of_cell(u64::from(lon_high) + 1),
        lat_min: lat_of_cell(u64::from(lat_low)),
        lat_max: lat_of_cell(u64::from(lat_high) + 1),
    }
}
