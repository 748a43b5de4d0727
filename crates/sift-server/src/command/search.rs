//! RediSearch's FT.CREATE, FT.SEARCH, FT.INFO, FT._LIST and FT.DROPINDEX over Sift indexes
//! (`search/`). Options outside Sift's subset answer an error naming them.

use std::sync::atomic::Ordering;

use bytes::Bytes;
use sift_index::{IndexKind, Maintenance};
use sift_resp::{Protocol, Reply};

use super::{is, keyspace_error, parse_integer, truncated, Command};
use crate::json_path;
use crate::keyspace::record::{self, Value};
use crate::search::definition::{identifier_segments, Definition, Field, FieldType, KeyType};
use crate::search::execute::{self, Match, Order};
use crate::search::query::{self, Params};
use crate::search::{BuildState, SearchError, SearchIndex};
use crate::session::{Client, Shared};

/// RediSearch's default `MAXSEARCHRESULTS`: the largest LIMIT offset + count.
const MAX_SEARCH_RESULTS: i64 = 1_000_000;
/// RediSearch's limit on schema fields.
const MAX_SCHEMA_FIELDS: usize = 1024;

pub(super) fn commands() -> Vec<Command> {
    vec![
        Command::writes(
            "search",
            "ft.create",
            -5,
            "Creates a search index over hashes or JSON documents with NUMERIC, TAG and GEO fields.",
            ft_create,
        ),
        Command::reads(
            "search",
            "ft.search",
            -3,
            "Searches an index: numeric ranges, tags, geo radius, conjunctions; newest first.",
            ft_search,
        ),
        Command::reads(
            "search",
            "ft.info",
            2,
            "Information about a search index, its build progress and its Sift indexes.",
            ft_info,
        ),
        Command::reads(
            "search",
            "ft._list",
            1,
            "The names of every search index.",
            ft_list,
        ),
        Command::writes(
            "search",
            "ft.dropindex",
            -2,
            "Drops a search index, and with DD the documents it covers.",
            ft_dropindex,
        ),
    ]
}

fn text(argument: &[u8]) -> Result<&str, Reply> {
    std::str::from_utf8(argument).map_err(|_| Reply::error("ERR arguments must be UTF-8 text"))
}

fn search_error(error: SearchError) -> Reply {
    match error {
        SearchError::Refused(reason) => Reply::error(reason),
        SearchError::Keyspace(error) => keyspace_error(error),
    }
}

/// A count argument (`PREFIX n`, `RETURN n`, …): a non-negative integer no larger than what
/// is left.
fn count_of(argument: Option<&Bytes>, left: usize, option: &str) -> Result<usize, Reply> {
    let count = argument
        .and_then(|argument| parse_integer(argument))
        .filter(|count| *count >= 0)
        .ok_or_else(|| Reply::error(format!("Bad arguments for {option}: expected a count")))?;
    let count = usize::try_from(count).unwrap_or(usize::MAX);
    if count > left {
        return Err(Reply::error(format!(
            "Bad arguments for {option}: {count} given, {left} follow"
        )));
    }
    Ok(count)
}

fn ft_create(shared: &Shared, _: &mut Client, arguments: &[Bytes]) -> Reply {
    match parse_create(arguments) {
        Ok(definition) => match shared.search.create(&shared.keyspace, definition) {
            Ok(()) => Reply::ok(),
            Err(error) => search_error(error),
        },
        Err(reply) => reply,
    }
}

fn parse_create(arguments: &[Bytes]) -> Result<Definition, Reply> {
    let name = text(&arguments[1])?.to_owned();
    let mut on = KeyType::Hash;
    let mut prefixes = Vec::new();
    let mut position = 2;
    loop {
        let Some(option) = arguments.get(position) else {
            return Err(Reply::error("No schema found"));
        };
        position += 1;
        if is(option, "SCHEMA") {
            break;
        } else if is(option, "ON") {
            let Some(kind) = arguments.get(position) else {
                return Err(Reply::error("Missing argument for ON"));
            };
            on = if is(kind, "HASH") {
                KeyType::Hash
            } else if is(kind, "JSON") {
                KeyType::Json
            } else {
                return Err(Reply::error(format!(
                    "Unknown index type '{}' (Sift indexes HASH and JSON keys)",
                    truncated(kind)
                )));
            };
            position += 1;
        } else if is(option, "PREFIX") {
            let count = count_of(
                arguments.get(position),
                arguments.len().saturating_sub(position + 1),
                "PREFIX",
            )?;
            for prefix in &arguments[position + 1..position + 1 + count] {
                prefixes.push(text(prefix)?.to_owned());
            }
            position += 1 + count;
        } else if [
            "LANGUAGE",
            "LANGUAGE_FIELD",
            "SCORE",
            "SCORE_FIELD",
            "PAYLOAD_FIELD",
        ]
        .iter()
        .any(|word| is(option, word))
        {
            // Scoring and text options: they change nothing for NUMERIC, TAG and GEO fields.
            if arguments.get(position).is_none() {
                return Err(Reply::error(format!(
                    "Missing argument for {}",
                    truncated(option).to_uppercase()
                )));
            }
            position += 1;
        } else if ["MAXTEXTFIELDS", "NOOFFSETS", "NOHL", "NOFIELDS", "NOFREQS"]
            .iter()
            .any(|word| is(option, word))
        {
        } else if is(option, "STOPWORDS") {
            let count = count_of(
                arguments.get(position),
                arguments.len().saturating_sub(position + 1),
                "STOPWORDS",
            )?;
            position += 1 + count;
        } else if ["FILTER", "TEMPORARY", "SKIPINITIALSCAN", "ASYNC"]
            .iter()
            .any(|word| is(option, word))
        {
            return Err(Reply::error(format!(
                "Sift does not support FT.CREATE's {} option",
                truncated(option).to_uppercase()
            )));
        } else {
            return Err(Reply::error(format!(
                "Unknown argument `{}`",
                truncated(option)
            )));
        }
    }
    let prefixes = if prefixes.iter().any(String::is_empty) {
        Vec::new()
    } else {
        prefixes
    };
    let mut fields: Vec<Field> = Vec::new();
    while position < arguments.len() {
        let (field, next) = parse_field(arguments, position, on)?;
        if fields.iter().any(|other| other.alias == field.alias) {
            return Err(Reply::error(format!(
                "Duplicate field in schema - {}",
                field.alias
            )));
        }
        fields.push(field);
        if fields.len() > MAX_SCHEMA_FIELDS {
            return Err(Reply::error(format!(
                "Schema is limited to {MAX_SCHEMA_FIELDS} fields"
            )));
        }
        position = next;
    }
    if fields.is_empty() {
        return Err(Reply::error("Fields arguments are missing"));
    }
    Ok(Definition {
        name,
        id: 0,
        on,
        prefixes,
        fields,
    })
}

/// One `identifier [AS alias] TYPE [options]` of a schema; returns it and where the next starts.
fn parse_field(arguments: &[Bytes], start: usize, on: KeyType) -> Result<(Field, usize), Reply> {
    let identifier = text(&arguments[start])?.to_owned();
    let mut position = start + 1;
    let mut alias = identifier.clone();
    if arguments.get(position).is_some_and(|word| is(word, "AS")) {
        let Some(name) = arguments.get(position + 1) else {
            return Err(Reply::error(format!(
                "Missing alias after AS for field '{identifier}'"
            )));
        };
        text(name)?.clone_into(&mut alias);
        position += 2;
    }
    let Some(type_name) = arguments.get(position) else {
        return Err(Reply::error(format!(
            "Field type is missing for field '{identifier}'"
        )));
    };
    position += 1;
    let mut search_type = if is(type_name, "NUMERIC") {
        FieldType::Numeric
    } else if is(type_name, "TAG") {
        FieldType::Tag {
            separator: ',',
            case_sensitive: false,
        }
    } else if is(type_name, "GEO") {
        FieldType::Geo
    } else if ["TEXT", "VECTOR", "GEOSHAPE"]
        .iter()
        .any(|word| is(type_name, word))
    {
        return Err(Reply::error(format!(
            "Sift does not support {} fields (field '{identifier}'): it indexes NUMERIC, TAG and GEO",
            truncated(type_name).to_uppercase()
        )));
    } else {
        return Err(Reply::error(format!(
            "Invalid field type for field `{identifier}`"
        )));
    };
    let mut sortable = false;
    let mut kind: Option<IndexKind> = None;
    let mut maintenance: Option<Maintenance> = None;
    while let Some(option) = arguments.get(position) {
        if is(option, "SORTABLE") {
            sortable = true;
            position += 1;
            if arguments.get(position).is_some_and(|word| is(word, "UNF")) {
                position += 1;
            }
        } else if is(option, "SEPARATOR") {
            let FieldType::Tag { separator, .. } = &mut search_type else {
                return Err(Reply::error(format!(
                    "SEPARATOR applies to TAG fields (field '{identifier}')"
                )));
            };
            let given = arguments
                .get(position + 1)
                .map(|word| text(word))
                .transpose()?;
            let mut chars = given.unwrap_or("").chars();
            match (chars.next(), chars.next()) {
                (Some(c), None) => *separator = c,
                _ => {
                    return Err(Reply::error(format!(
                        "Tag separator must be a single character (field '{identifier}')"
                    )))
                }
            }
            position += 2;
        } else if is(option, "CASESENSITIVE") {
            let FieldType::Tag { case_sensitive, .. } = &mut search_type else {
                return Err(Reply::error(format!(
                    "CASESENSITIVE applies to TAG fields (field '{identifier}')"
                )));
            };
            *case_sensitive = true;
            position += 1;
        } else if is(option, "WITHSUFFIXTRIE") {
            // Serves suffix queries only, which Sift refuses.
            position += 1;
        } else if is(option, "SIFT.KIND") {
            let given = arguments
                .get(position + 1)
                .map(|word| text(word))
                .transpose()?;
            kind = Some(given.unwrap_or("").to_ascii_lowercase().parse().map_err(
                |reason: String| {
                    Reply::error(format!("SIFT.KIND of field '{identifier}': {reason}"))
                },
            )?);
            position += 2;
        } else if is(option, "SIFT.MAINTENANCE") {
            let given = arguments
                .get(position + 1)
                .map(|word| text(word))
                .transpose()?;
            maintenance = Some(given.unwrap_or("").to_ascii_lowercase().parse().map_err(
                |reason: String| {
                    Reply::error(format!(
                        "SIFT.MAINTENANCE of field '{identifier}': {reason}"
                    ))
                },
            )?);
            position += 2;
        } else if [
            "NOINDEX",
            "INDEXMISSING",
            "INDEXEMPTY",
            "NOSTEM",
            "PHONETIC",
            "WEIGHT",
        ]
        .iter()
        .any(|word| is(option, word))
        {
            return Err(Reply::error(format!(
                "Sift does not support the field option {} (field '{identifier}')",
                truncated(option).to_uppercase()
            )));
        } else {
            // The next field's identifier.
            break;
        }
    }
    let segments = identifier_segments(&identifier, on)
        .map_err(|reason| Reply::error(format!("Invalid field '{identifier}': {reason}")))?;
    let kind = kind.unwrap_or(FieldType::DEFAULT_KIND);
    let maintenance = maintenance.unwrap_or_else(|| FieldType::default_maintenance(kind));
    Ok((
        Field {
            identifier,
            alias,
            search_type,
            sortable,
            kind,
            maintenance,
            sift_index: String::new(),
            path: std::sync::OnceLock::new(),
            segments,
        },
        position,
    ))
}

/// FT.SEARCH's options.
struct SearchOptions {
    query: String,
    params: Params,
    /// FILTER and GEOFILTER, written as query clauses.
    filters: Vec<String>,
    no_content: bool,
    /// (identifier, name in the reply).
    returns: Option<Vec<(String, String)>>,
    sort: Option<(String, bool)>,
    offset: usize,
    count: usize,
}

fn parse_search(arguments: &[Bytes]) -> Result<SearchOptions, Reply> {
    let mut options = SearchOptions {
        query: text(&arguments[2])?.to_owned(),
        params: Params::new(),
        filters: Vec::new(),
        no_content: false,
        returns: None,
        sort: None,
        offset: 0,
        count: 10,
    };
    let mut position = 3;
    while let Some(option) = arguments.get(position) {
        position += 1;
        let left = arguments.len() - position;
        if is(option, "NOCONTENT") {
            options.no_content = true;
        } else if ["VERBATIM", "NOSTOPWORDS", "INORDER", "EXPLAINSCORE"]
            .iter()
            .any(|word| is(option, word))
        {
            // Text-search options: nothing to do for NUMERIC, TAG and GEO clauses.
        } else if ["TIMEOUT", "LANGUAGE", "SLOP", "DIALECT"]
            .iter()
            .any(|word| is(option, word))
        {
            if left == 0 {
                return Err(Reply::error(format!(
                    "Missing argument for {}",
                    truncated(option).to_uppercase()
                )));
            }
            if is(option, "DIALECT")
                && !parse_integer(&arguments[position]).is_some_and(|n| (1..=4).contains(&n))
            {
                return Err(Reply::error("DIALECT requires a version from 1 to 4"));
            }
            position += 1;
        } else if is(option, "LIMIT") {
            let (Some(offset), Some(count)) = (
                arguments.get(position).and_then(|a| parse_integer(a)),
                arguments.get(position + 1).and_then(|a| parse_integer(a)),
            ) else {
                return Err(Reply::error("LIMIT needs two integers: offset and count"));
            };
            if offset < 0 || count < 0 {
                return Err(Reply::error("LIMIT offset and count must not be negative"));
            }
            if offset.saturating_add(count) > MAX_SEARCH_RESULTS {
                return Err(Reply::error(format!(
                    "LIMIT exceeds maximum of {MAX_SEARCH_RESULTS}"
                )));
            }
            options.offset = offset as usize;
            options.count = count as usize;
            position += 2;
        } else if is(option, "SORTBY") {
            let Some(field) = arguments.get(position) else {
                return Err(Reply::error("Missing argument for SORTBY"));
            };
            let field = text(field)?;
            let field = field.strip_prefix('@').unwrap_or(field).to_owned();
            position += 1;
            let mut ascending = true;
            if let Some(direction) = arguments.get(position) {
                if is(direction, "ASC") {
                    position += 1;
                } else if is(direction, "DESC") {
                    ascending = false;
                    position += 1;
                }
            }
            options.sort = Some((field, ascending));
        } else if is(option, "RETURN") {
            let count = count_of(arguments.get(position), left.saturating_sub(1), "RETURN")?;
            position += 1;
            let end = position + count;
            let mut returns = Vec::new();
            while position < end {
                let identifier = text(&arguments[position])?.to_owned();
                position += 1;
                let mut name = identifier.clone();
                if position + 2 <= end && is(&arguments[position], "AS") {
                    text(&arguments[position + 1])?.clone_into(&mut name);
                    position += 2;
                }
                returns.push((identifier, name));
            }
            if returns.is_empty() {
                options.no_content = true;
            }
            options.returns = Some(returns);
        } else if is(option, "PARAMS") {
            let count = count_of(arguments.get(position), left.saturating_sub(1), "PARAMS")?;
            if count % 2 != 0 {
                return Err(Reply::error(
                    "Bad arguments for PARAMS: expected an even number of names and values",
                ));
            }
            for pair in arguments[position + 1..position + 1 + count].chunks(2) {
                options
                    .params
                    .insert(text(&pair[0])?.to_owned(), text(&pair[1])?.to_owned());
            }
            position += 1 + count;
        } else if is(option, "FILTER") {
            let [field, lo, hi] = arguments.get(position..position + 3).unwrap_or_default() else {
                return Err(Reply::error(
                    "FILTER needs a field, a minimum and a maximum",
                ));
            };
            let clause = format!("@{}:[{} {}]", text(field)?, text(lo)?, text(hi)?);
            options.filters.push(clause);
            position += 3;
        } else if is(option, "GEOFILTER") {
            let [field, lon, lat, radius, unit] =
                arguments.get(position..position + 5).unwrap_or_default()
            else {
                return Err(Reply::error(
                    "GEOFILTER needs a field, a longitude, a latitude, a radius and a unit",
                ));
            };
            let clause = format!(
                "@{}:[{} {} {} {}]",
                text(field)?,
                text(lon)?,
                text(lat)?,
                text(radius)?,
                text(unit)?
            );
            options.filters.push(clause);
            position += 5;
        } else if [
            "WITHSCORES",
            "WITHPAYLOADS",
            "WITHSORTKEYS",
            "INKEYS",
            "INFIELDS",
            "SUMMARIZE",
            "HIGHLIGHT",
            "EXPANDER",
            "SCORER",
            "PAYLOAD",
        ]
        .iter()
        .any(|word| is(option, word))
        {
            return Err(Reply::error(format!(
                "Sift does not support FT.SEARCH's {} option (hits are ordered newest first, \
                 or by SORTBY; nothing is scored)",
                truncated(option).to_uppercase()
            )));
        } else {
            return Err(Reply::error(format!(
                "Unknown argument `{}` at position {}",
                truncated(option),
                position - 1
            )));
        }
    }
    Ok(options)
}

fn ft_search(shared: &Shared, client: &mut Client, arguments: &[Bytes]) -> Reply {
    let name = String::from_utf8_lossy(&arguments[1]).into_owned();
    let Some(index) = shared.search.get(&name) else {
        return Reply::error(format!("{name}: no such index"));
    };
    index.uses.fetch_add(1, Ordering::Relaxed);
    let options = match parse_search(arguments) {
        Ok(options) => options,
        Err(reply) => return reply,
    };
    let definition = &index.definition;
    let mut parsed = match query::parse(&options.query, definition, &options.params) {
        Ok(parsed) => parsed,
        Err(reason) => return Reply::error(reason),
    };
    // FILTER and GEOFILTER are clauses written as options: parse them as clauses.
    for clause in &options.filters {
        match query::parse(clause, definition, &options.params) {
            Ok(filter) => parsed.clauses.extend(filter.clauses),
            Err(reason) => return Reply::error(reason),
        }
    }
    if parsed.clauses.len() > query::MAX_CLAUSES {
        return Reply::error(format!(
            "Sift answers at most {} clauses in one query (FILTER and GEOFILTER included)",
            query::MAX_CLAUSES
        ));
    }
    let order = match &options.sort {
        None => Order::Newest,
        Some((field, ascending)) => match definition.field(field) {
            Some((_, schema_field)) if schema_field.search_type == FieldType::Geo => {
                return Reply::error(format!("Sift cannot sort by the GEO field '{field}'"))
            }
            Some((position, _)) => Order::Field {
                field: position,
                ascending: *ascending,
            },
            None => return Reply::error(format!("Property `{field}` not loaded nor in schema")),
        },
    };
    let matches = match execute::run(
        shared.keyspace.database(),
        definition,
        &parsed,
        order,
        index.is_ready(),
    ) {
        Ok(matches) => matches,
        Err(error) => return keyspace_error(error.into()),
    };
    let total = matches.len() as i64;
    let page: Vec<&Match> = matches
        .iter()
        .skip(options.offset)
        .take(options.count)
        .collect();
    let mut hits = Vec::with_capacity(page.len());
    for hit in page {
        let content = if options.no_content {
            None
        } else {
            Some(content_of(definition, hit, options.returns.as_deref()))
        };
        hits.push((Reply::bulk(hit.key.clone()), content));
    }
    search_reply(client.protocol, total, hits, options.count == 0)
}

/// The fields a hit answers: every hash field, `$` and the document for JSON, or what RETURN
/// names.
fn content_of(
    definition: &Definition,
    hit: &Match,
    returns: Option<&[(String, String)]>,
) -> Vec<(Reply, Reply)> {
    let value = record::decode(&hit.doc).ok();
    let mut pairs = Vec::new();
    match (value, returns) {
        (Some(Value::Hash(fields)), None) => {
            for (field, value) in fields {
                pairs.push((Reply::bulk(field), Reply::bulk(value)));
            }
        }
        (Some(Value::Json(document)), None) => {
            pairs.push((Reply::bulk("$"), Reply::bulk(json_path::minify(&document))));
        }
        (Some(Value::Hash(fields)), Some(returns)) => {
            for (identifier, name) in returns {
                let field = definition
                    .field(identifier)
                    .map_or(identifier.as_str(), |(_, field)| field.identifier.as_str());
                if let Some(value) = fields.get(field.as_bytes()) {
                    pairs.push((Reply::bulk(name.clone()), Reply::bulk(value.clone())));
                }
            }
        }
        (Some(Value::Json(document)), Some(returns)) => {
            for (identifier, name) in returns {
                let path_text = definition
                    .field(identifier)
                    .map_or(identifier.as_str(), |(_, field)| field.identifier.as_str());
                let Ok(path) = json_path::parse(path_text) else {
                    continue;
                };
                let Some(selected) = json_path::select(&document, &path) else {
                    continue;
                };
                // A string answers its text; anything else its JSON.
                let value = match serde_json::from_str::<String>(selected) {
                    Ok(text) => text,
                    Err(_) => json_path::minify(selected),
                };
                pairs.push((Reply::bulk(name.clone()), Reply::bulk(value)));
            }
        }
        _ => {}
    }
    pairs
}

/// A hit of FT.SEARCH: its key, and its fields unless NOCONTENT.
type SearchHit = (Reply, Option<Vec<(Reply, Reply)>>);

/// RESP2: `[total, key, [field, value, …], …]` (no field lists with NOCONTENT). RESP3: the map
/// RediSearch 2.8 answers (`total_results`, `results` with `id` and `extra_attributes`).
fn search_reply(protocol: Protocol, total: i64, hits: Vec<SearchHit>, count_only: bool) -> Reply {
    match protocol {
        Protocol::Resp2 => {
            let mut items = vec![Reply::Integer(total)];
            if !count_only {
                for (key, content) in hits {
                    items.push(key);
                    if let Some(content) = content {
                        items.push(Reply::Array(
                            content.into_iter().flat_map(|(f, v)| [f, v]).collect(),
                        ));
                    }
                }
            }
            Reply::Array(items)
        }
        Protocol::Resp3 => {
            let results = hits
                .into_iter()
                .map(|(key, content)| {
                    let mut entry = vec![(Reply::bulk("id"), key)];
                    if let Some(content) = content {
                        entry.push((Reply::bulk("extra_attributes"), Reply::Map(content)));
                    }
                    entry.push((Reply::bulk("values"), Reply::Array(Vec::new())));
                    Reply::Map(entry)
                })
                .collect();
            Reply::Map(vec![
                (Reply::bulk("attributes"), Reply::Array(Vec::new())),
                (Reply::bulk("format"), Reply::bulk("STRING")),
                (Reply::bulk("results"), Reply::Array(results)),
                (Reply::bulk("total_results"), Reply::Integer(total)),
                (Reply::bulk("warning"), Reply::Array(Vec::new())),
            ])
        }
    }
}

fn ft_list(shared: &Shared, _: &mut Client, _: &[Bytes]) -> Reply {
    Reply::Set(
        shared
            .search
            .all()
            .iter()
            .map(|index| Reply::bulk(index.definition.name.clone()))
            .collect(),
    )
}

fn ft_dropindex(shared: &Shared, _: &mut Client, arguments: &[Bytes]) -> Reply {
    let delete_documents = match &arguments[2..] {
        [] => false,
        [flag] if is(flag, "DD") => true,
        [flag] if is(flag, "KEEPDOCS") => false,
        _ => return super::syntax_error(),
    };
    let name = String::from_utf8_lossy(&arguments[1]).into_owned();
    let index = match shared.search.drop_index(&shared.keyspace, &name) {
        Ok(index) => index,
        Err(error) => return search_error(error),
    };
    if delete_documents {
        if let Err(error) = delete_covered(shared, &index) {
            return keyspace_error(error);
        }
    }
    Reply::ok()
}

/// FT.DROPINDEX … DD: deletes every key under the index's prefixes that holds the index's
/// type, a page at a time.
fn delete_covered(
    shared: &Shared,
    index: &SearchIndex,
) -> Result<(), crate::keyspace::KeyspaceError> {
    let member = index.definition.on.record_member();
    execute::for_each_covered_page(shared.keyspace.database(), &index.definition, |page| {
        let keys: Vec<Bytes> = page
            .into_iter()
            .filter(|hit| {
                serde_json::from_slice::<serde_json::Value>(&hit.doc)
                    .is_ok_and(|record| record.get(member).is_some())
            })
            .map(|hit| Bytes::from(hit.pk))
            .collect();
        shared.keyspace.delete_many(&keys).map(|_| ())
    })
}

fn ft_info(shared: &Shared, _: &mut Client, arguments: &[Bytes]) -> Reply {
    let name = String::from_utf8_lossy(&arguments[1]).into_owned();
    let Some(index) = shared.search.get(&name) else {
        return Reply::error("Unknown Index name");
    };
    let definition = &index.definition;
    // Members and indexing failures, counted by a scan of the prefixes (FT.INFO is not a hot
    // command; a count kept at every write would cost every write).
    let census = match execute::census(shared.keyspace.database(), definition) {
        Ok(census) => census,
        Err(error) => return keyspace_error(error.into()),
    };
    let progress = index.progress();
    let bulk = |text: &str| Reply::bulk(text.to_owned());
    let attributes = definition
        .fields
        .iter()
        .map(|field| {
            let mut attribute = vec![
                bulk("identifier"),
                bulk(&field.identifier),
                bulk("attribute"),
                bulk(&field.alias),
                bulk("type"),
                bulk(field.search_type.name()),
            ];
            if let FieldType::Tag {
                separator,
                case_sensitive,
            } = &field.search_type
            {
                attribute.push(bulk("SEPARATOR"));
                attribute.push(bulk(&separator.to_string()));
                if *case_sensitive {
                    attribute.push(bulk("CASESENSITIVE"));
                }
            }
            if field.sortable {
                attribute.push(bulk("SORTABLE"));
            }
            attribute.extend([
                bulk("SIFT.KIND"),
                bulk(field.kind.name()),
                bulk("SIFT.MAINTENANCE"),
                bulk(field.maintenance.name()),
            ]);
            Reply::Array(attribute)
        })
        .collect();
    let sift_fields = definition
        .fields
        .iter()
        .enumerate()
        .map(|(position, field)| {
            let ready = progress.state == BuildState::Ready || position < progress.fields_ready;
            Reply::Array(vec![
                bulk("attribute"),
                bulk(&field.alias),
                bulk("sift_index"),
                bulk(&field.sift_index),
                bulk("kind"),
                bulk(field.kind.name()),
                bulk("maintenance"),
                bulk(field.maintenance.name()),
                bulk("state"),
                bulk(if ready { "ready" } else { "building" }),
            ])
        })
        .collect();
    let (indexing, build_error) = match &progress.state {
        BuildState::Indexing => (1, None),
        BuildState::Ready => (0, None),
        BuildState::Failed(reason) => (0, Some(reason.clone())),
    };
    let mut pairs = vec![
        (bulk("index_name"), bulk(&definition.name)),
        (bulk("index_options"), Reply::Array(Vec::new())),
        (
            bulk("index_definition"),
            Reply::Array(vec![
                bulk("key_type"),
                bulk(definition.on.name()),
                bulk("prefixes"),
                Reply::Array(if definition.prefixes.is_empty() {
                    vec![bulk("")]
                } else {
                    definition.prefixes.iter().map(|p| bulk(p)).collect()
                }),
                bulk("default_score"),
                bulk("1"),
            ]),
        ),
        (bulk("attributes"), Reply::Array(attributes)),
        (bulk("num_docs"), Reply::Integer(census.documents as i64)),
        (
            bulk("hash_indexing_failures"),
            Reply::Integer(census.failures as i64),
        ),
        (bulk("indexing"), Reply::Integer(indexing)),
        (
            bulk("percent_indexed"),
            bulk(&format!("{}", progress.fraction(definition.fields.len()))),
        ),
        (
            bulk("number_of_uses"),
            Reply::Integer(index.uses.load(Ordering::Relaxed) as i64),
        ),
        (bulk("sift_fields"), Reply::Array(sift_fields)),
    ];
    if let Some(reason) = census.first_failure {
        pairs.push((bulk("last_indexing_failure"), bulk(&reason)));
    }
    if let Some(reason) = build_error {
        pairs.push((bulk("sift_build_error"), bulk(&reason)));
    }
    Reply::Map(pairs)
}
