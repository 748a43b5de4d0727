//! Tests of recovery from background errors.
