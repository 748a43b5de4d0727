//! Client histories and their linearizability check, for fault tests: every client operation
//! is recorded when it is invoked and when it returns, in real-time order, then each key's
//! history is checked as a register with the `consistency_model` crate's
//! `LinearizabilityTester` (Stateright's checker, published on its own). Registers are
//! checked key by key: linearizability composes over independent objects, and per-key
//! histories keep the checker's search small.
//!
//! A write whose outcome is unknown (the client gave up waiting) stays in flight for ever:
//! the checker may place it anywhere after its invocation, or leave it out. Its client then
//! continues under a new thread id, as a new process would.

use consistency_model::{
    ConsistencyTester, LinearizabilityTester, Register, RegisterOp, RegisterRet,
};
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

/// A register's value: 0 is "no document" (the initial state, and what a delete writes).
pub type Value = u64;

/// What a client did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    Write(Value),
    Read,
}

/// How it ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Written,
    Read(Value),
    /// No answer: may or may not have happened (writes); a read that failed is recorded as
    /// this too and ignored by the check, since it changed nothing.
    Unknown,
}

#[derive(Debug, Clone, Copy)]
enum Event {
    Invoke {
        thread: u64,
        key: u64,
        operation: Operation,
        at: Duration,
    },
    Return {
        thread: u64,
        key: u64,
        outcome: Outcome,
        at: Duration,
    },
}

/// A shared, append-only history of client operations on registers named by `u64` keys.
#[derive(Debug)]
pub struct History {
    started: Instant,
    events: Mutex<Vec<Event>>,
}

impl Default for History {
    fn default() -> Self {
        History::new()
    }
}

impl History {
    pub fn new() -> History {
        History {
            started: Instant::now(),
            events: Mutex::new(Vec::new()),
        }
    }

    /// Records that `thread` invoked `operation` on `key` (before sending it).
    pub fn invoke(&self, thread: u64, key: u64, operation: Operation) {
        let mut events = self.events.lock();
        events.push(Event::Invoke {
            thread,
            key,
            operation,
            at: self.started.elapsed(),
        });
    }

    /// Records how `thread`'s operation on `key` ended (after the answer arrived).
    pub fn complete(&self, thread: u64, key: u64, outcome: Outcome) {
        let mut events = self.events.lock();
        events.push(Event::Return {
            thread,
            key,
            outcome,
            at: self.started.elapsed(),
        });
    }

    /// Operations recorded (invocations).
    pub fn operations(&self) -> usize {
        self.events
            .lock()
            .iter()
            .filter(|e| matches!(e, Event::Invoke { .. }))
            .count()
    }

    /// Checks every key's history; on a violation, the text names the key and lists its
    /// history (the smallest history the checker judged, since keys are independent).
    pub fn check(&self) -> Result<CheckSummary, String> {
        let events = self.events.lock().clone();
        let mut by_key: BTreeMap<u64, Vec<Event>> = BTreeMap::new();
        for event in events {
            let key = match event {
                Event::Invoke { key, .. } | Event::Return { key, .. } => key,
            };
            by_key.entry(key).or_default().push(event);
        }
        let mut summary = CheckSummary::default();
        for (key, events) in &by_key {
            check_key(*key, events, &mut summary)?;
        }
        Ok(summary)
    }
}

/// What a successful check covered.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct CheckSummary {
    pub keys: usize,
    pub completed: usize,
    /// Writes of unknown outcome (in flight for ever); failed reads are not counted.
    pub unknown_writes: usize,
}

fn check_key(key: u64, events: &[Event], summary: &mut CheckSummary) -> Result<(), String> {
    let events = without_failed_reads(events);
    if let Err(e) = judge(&events) {
        return Err(format!(
            "key {key}: the history itself is malformed ({e}):\n{}",
            render(&events)
        ));
    }
    for event in &events {
        match event {
            Event::Return {
                outcome: Outcome::Unknown,
                ..
            } => summary.unknown_writes += 1,
            Event::Return { .. } => summary.completed += 1,
            Event::Invoke { .. } => {}
        }
    }
    summary.keys += 1;
    if judge(&events) == Ok(true) {
        return Ok(());
    }
    let smallest = minimal_violation(&events);
    Err(format!(
        "key {key}: not linearizable. A smallest failing part of its history ({} of {} \
         events: the shortest failing prefix, then every operation dropped whose removal \
         keeps it failing; times from the start of the run):\n{}",
        smallest.len(),
        events.len(),
        render(&smallest)
    ))
}

/// The events without failed reads (a read that got no answer changed nothing).
fn without_failed_reads(events: &[Event]) -> Vec<Event> {
    let mut pending: BTreeMap<u64, (usize, Operation)> = BTreeMap::new();
    let mut dropped = std::collections::HashSet::new();
    for (position, event) in events.iter().enumerate() {
        match *event {
            Event::Invoke {
                thread, operation, ..
            } => {
                pending.insert(thread, (position, operation));
            }
            Event::Return {
                thread, outcome, ..
            } => {
                if let Some((invoked_at, operation)) = pending.remove(&thread) {
                    if operation == Operation::Read && outcome == Outcome::Unknown {
                        dropped.insert(invoked_at);
                        dropped.insert(position);
                    }
                }
            }
        }
    }
    events
        .iter()
        .enumerate()
        .filter(|(position, _)| !dropped.contains(position))
        .map(|(_, event)| *event)
        .collect()
}

/// Whether `events` (one key's, in real-time order) are linearizable as a register that
/// starts empty; an error if they are not a well-formed history.
fn judge(events: &[Event]) -> Result<bool, String> {
    let mut tester: LinearizabilityTester<u64, Register<Value>> =
        LinearizabilityTester::new(Register::new(0));
    for event in events {
        match *event {
            Event::Invoke {
                thread, operation, ..
            } => {
                let op = match operation {
                    Operation::Write(value) => RegisterOp::Write(value),
                    Operation::Read => RegisterOp::Read,
                };
                tester.on_invoke(thread, op)?;
            }
            Event::Return {
                thread, outcome, ..
            } => match outcome {
                Outcome::Written => {
                    tester.on_return(thread, RegisterRet::WriteOk)?;
                }
                Outcome::Read(value) => {
                    tester.on_return(thread, RegisterRet::ReadOk(value))?;
                }
                // Stays in flight: may have taken effect at any point after its invocation.
                Outcome::Unknown => {}
            },
        }
    }
    Ok(tester.is_consistent())
}

fn fails(events: &[Event]) -> bool {
    judge(events) == Ok(false)
}

/// A small failing history inside `events` (which fail): the shortest failing prefix (a
/// prefix of a linearizable history is linearizable, so failure is monotonic in the prefix
/// length), then operations removed one at a time while it still fails: reads first, then
/// writes whose value no remaining read returned (removing those cannot create a violation
/// of its own).
fn minimal_violation(events: &[Event]) -> Vec<Event> {
    let (mut low, mut high) = (0, events.len());
    while low + 1 < high {
        let middle = usize::midpoint(low, high);
        if fails(&events[..middle]) {
            high = middle;
        } else {
            low = middle;
        }
    }
    let mut kept: Vec<Event> = events[..high].to_vec();
    let mut attempts = 0;
    for reads_pass in [true, false] {
        let mut position = 0;
        while position < kept.len() && attempts < 2_000 {
            let candidate = match kept[position] {
                Event::Invoke {
                    thread, operation, ..
                } => {
                    let removable = match operation {
                        Operation::Read => reads_pass,
                        Operation::Write(value) => !reads_pass && !is_read(&kept, value),
                    };
                    removable.then_some(thread)
                }
                Event::Return { .. } => None,
            };
            let Some(thread) = candidate else {
                position += 1;
                continue;
            };
            attempts += 1;
            let mut trial = kept.clone();
            trial.remove(position);
            // Its return, if it has one, is that thread's next return.
            if let Some(offset) = trial[position..]
                .iter()
                .position(|e| matches!(e, Event::Return { thread: t, .. } if *t == thread))
            {
                trial.remove(position + offset);
            }
            if fails(&trial) {
                kept = trial;
            } else {
                position += 1;
            }
        }
    }
    kept
}

fn is_read(events: &[Event], value: Value) -> bool {
    events
        .iter()
        .any(|e| matches!(e, Event::Return { outcome: Outcome::Read(v), .. } if *v == value))
}

fn render(events: &[Event]) -> String {
    let mut out = String::new();
    for event in events {
        let _ = match *event {
            Event::Invoke {
                thread,
                operation,
                at,
                ..
            } => writeln!(
                out,
                "  {:>10.3} ms  thread {thread:>4} invokes {operation:?}",
                at.as_secs_f64() * 1e3
            ),
            Event::Return {
                thread,
                outcome,
                at,
                ..
            } => writeln!(
                out,
                "  {:>10.3} ms  thread {thread:>4} returns {outcome:?}",
                at.as_secs_f64() * 1e3
            ),
        };
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_of_an_overwritten_value_after_the_overwrite_returned_is_a_violation() {
        let history = History::new();
        history.invoke(1, 7, Operation::Write(1));
        history.complete(1, 7, Outcome::Written);
        history.invoke(1, 7, Operation::Write(2));
        history.complete(1, 7, Outcome::Written);
        history.invoke(2, 7, Operation::Read);
        history.complete(2, 7, Outcome::Read(1));
        let error = history.check().err().unwrap_or_default();
        assert!(error.contains("key 7: not linearizable"), "{error}");
        assert!(error.contains("returns Read(1)"), "{error}");
    }

    #[test]
    fn a_violation_is_reported_with_only_the_operations_it_needs() {
        // Noise on either side of the violation: reads and writes of other values, and
        // events after it.
        let history = History::new();
        for round in 0..20 {
            history.invoke(5, 7, Operation::Read);
            history.complete(
                5,
                7,
                Outcome::Read(if round == 0 { 0 } else { 100 + round - 1 }),
            );
            history.invoke(1, 7, Operation::Write(100 + round));
            history.complete(1, 7, Outcome::Written);
        }
        history.invoke(2, 7, Operation::Read);
        history.complete(2, 7, Outcome::Read(105));
        for round in 0..10 {
            history.invoke(1, 7, Operation::Write(200 + round));
            history.complete(1, 7, Outcome::Written);
        }
        let error = history.check().err().unwrap_or_default();
        // Write 105, write 119 (the last before it), then the stale read of 105.
        assert!(error.contains("(6 of 102 events"), "{error}");
        assert!(error.contains("Write(119)"), "{error}");
        assert!(error.contains("returns Read(105)"), "{error}");
        assert!(!error.contains("Write(200)"), "{error}");
    }

    #[test]
    fn a_read_concurrent_with_a_write_may_see_either_value() {
        let history = History::new();
        history.invoke(1, 7, Operation::Write(1));
        history.complete(1, 7, Outcome::Written);
        history.invoke(1, 7, Operation::Write(2));
        history.invoke(2, 7, Operation::Read);
        history.complete(2, 7, Outcome::Read(1));
        history.invoke(3, 7, Operation::Read);
        history.complete(3, 7, Outcome::Read(2));
        history.complete(1, 7, Outcome::Written);
        assert_eq!(
            history.check(),
            Ok(CheckSummary {
                keys: 1,
                completed: 4,
                unknown_writes: 0
            })
        );
    }

    #[test]
    fn an_unknown_write_may_have_happened_or_not_but_only_once() {
        // Write 1, of unknown outcome, may take effect after write 2 (it was still in flight):
        // reading 1 after write 2 returned is fine; reading 2 after that is not, since write
        // 1 took effect once.
        let history = History::new();
        history.invoke(1, 3, Operation::Write(1));
        history.complete(1, 3, Outcome::Unknown);
        history.invoke(2, 3, Operation::Write(2));
        history.complete(2, 3, Outcome::Written);
        history.invoke(4, 3, Operation::Read);
        history.complete(4, 3, Outcome::Read(1));
        assert!(history.check().is_ok());
        history.invoke(4, 3, Operation::Read);
        history.complete(4, 3, Outcome::Read(2));
        assert!(history.check().is_err());
    }

    #[test]
    fn keys_are_checked_apart_and_failed_reads_are_ignored() {
        let history = History::new();
        history.invoke(1, 1, Operation::Write(5));
        history.invoke(2, 2, Operation::Read);
        history.complete(2, 2, Outcome::Unknown);
        history.invoke(2, 2, Operation::Read);
        history.complete(2, 2, Outcome::Read(0));
        history.complete(1, 1, Outcome::Written);
        let summary = history.check().unwrap_or_default();
        assert_eq!(summary.keys, 2);
        assert_eq!(summary.completed, 2);
        assert_eq!(summary.unknown_writes, 0);
    }
}
