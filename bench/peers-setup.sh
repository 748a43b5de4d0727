# Sourced by bench/compare-*.sh: installs what the peer engines need and builds `sift` and
# `sift-peer` in release. Expects `repo` (the repository root) and `script` (a name for
# messages); sets `sift_bin` and `peer_bin`.

# The peers crate links all three peers (RocksDB, LevelDB, SQLite), so every script needs all.
packages=(librocksdb-dev libleveldb-dev libsqlite3-dev libclang-dev pkg-config)
missing=()
for package in "${packages[@]}"; do
    dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
done
if [[ ${#missing[@]} -gt 0 ]]; then
    echo "$script: installing ${missing[*]}" >&2
    sudo_cmd=()
    [[ "$(id -u)" -ne 0 ]] && sudo_cmd=(sudo)
    "${sudo_cmd[@]}" apt-get update >&2
    DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y "${missing[@]}" >&2
fi
command -v python3 >/dev/null || { echo "$script: python3 is required" >&2; exit 1; }

multiarch="$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)"
echo "$script: building sift and sift-peer (release)" >&2
cargo build --release -p sift-cli >&2
# The rocksdb crate links the system library (no bundled build) and generates its bindings
# from the system headers, so they match the installed version; rusqlite links the system
# libsqlite3; LevelDB is a hand-written binding to libleveldb.
env -u ROCKSDB_STATIC ROCKSDB_LIB_DIR="/usr/lib/$multiarch" ROCKSDB_INCLUDE_DIR=/usr/include \
    cargo build --release --manifest-path crates/sift-peers/Cargo.toml >&2
sift_bin="$repo/target/release/sift"
peer_bin="$repo/crates/sift-peers/target/release/sift-peer"
