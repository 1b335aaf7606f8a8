//! The table's formats through their detectors (see each file).

mod json_rows;
mod token_rows;
mod xml_rows;
