//! The command line: learn, check, filter, stats, export and import, run as a user would.
