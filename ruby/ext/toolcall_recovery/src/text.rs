//! Text and tool lists coming in from Ruby: type checks and UTF-8 borrowing.
//!
//! What is accepted: a `String` whose encoding is UTF-8 or US-ASCII and whose bytes are
//! valid in it, or a binary (`ASCII-8BIT`) `String` whose bytes happen to be valid UTF-8
//! (bytes read off a socket or a file opened in binary mode). Anything else that is a
//! `String` (another encoding, broken bytes) raises `ArgumentError`; anything that is not a
//! `String` raises `TypeError` (no implicit `to_str`).

use magnus::{
    encoding::{Coderange, EncodingCapable, RbEncoding},
    rb_sys::AsRawValue,
    Error, RArray, RString, Ruby, Value,
};

/// `value` as a `String`, or a `TypeError` naming `what`.
pub fn string(ruby: &Ruby, value: Value, what: &str) -> Result<RString, Error> {
    RString::from_value(value).ok_or_else(|| {
        Error::new(
            ruby.exception_type_error(),
            format!("{what} must be a String, got {}", crate::class_name(value)),
        )
    })
}

/// Borrows `s` as UTF-8 text.
///
/// # Safety
/// The `&str` points into memory Ruby owns: while it is alive, no Ruby code may run and
/// nothing may be allocated on the Ruby heap (which could run the GC). Copy out what must
/// outlive that.
pub unsafe fn borrow<'a>(ruby: &Ruby, s: &'a RString, what: &str) -> Result<&'a str, Error> {
    // The encoding index and the coderange are read from the object's flags, inline:
    // rb_enc_get_index alone was about 47 instructions a call (callgrind), as many as all
    // the rest of these checks.
    let raw = s.as_raw();
    let enc = rb_sys::ENCODING_GET(raw);
    // (magnus's `as_slice` is the same two reads, but a call.)
    let bytes = std::slice::from_raw_parts(
        rb_sys::RSTRING_PTR(raw).cast::<u8>(),
        usize::try_from(rb_sys::RSTRING_LEN(raw)).unwrap_or(0),
    );
    // Ruby caches what it knows of the bytes (the coderange): usually no scan at all.
    let coderange = || match s.enc_coderange() {
        Coderange::Unknown => s.enc_coderange_scan(),
        known => known,
    };
    let checked = if enc == rb_sys::rb_utf8_encindex() || enc == rb_sys::rb_usascii_encindex() {
        match coderange() {
            Coderange::SevenBit | Coderange::Valid => Ok(std::str::from_utf8_unchecked(bytes)),
            _ => std::str::from_utf8(bytes),
        }
    } else if enc == rb_sys::rb_ascii8bit_encindex() {
        match coderange() {
            Coderange::SevenBit => Ok(std::str::from_utf8_unchecked(bytes)),
            _ => std::str::from_utf8(bytes),
        }
    } else {
        return Err(Error::new(
            ruby.exception_arg_error(),
            format!(
                "{what} must be UTF-8 text, got a String in {}; convert it with .encode(\"UTF-8\")",
                RbEncoding::from(s.enc_get()).name()
            ),
        ));
    };
    checked.map_err(|e| {
        Error::new(
            ruby.exception_arg_error(),
            format!(
                "{what} is not valid UTF-8 (invalid byte sequence at byte {})",
                e.valid_up_to()
            ),
        )
    })
}

/// `value` as an `Array` of `String`s, or a `TypeError`. Only types are checked here, so a
/// call on clean text pays no more than that for its tool list.
pub fn check_tools(ruby: &Ruby, value: Value) -> Result<RArray, Error> {
    let type_error = |msg: String| Error::new(ruby.exception_type_error(), msg);
    let array = RArray::from_value(value).ok_or_else(|| {
        type_error(format!(
            "enabled_tools must be an Array of Strings, got {}",
            crate::class_name(value)
        ))
    })?;
    // SAFETY: the slice is only read, and nothing runs or allocates while it is alive.
    let bad = unsafe { array.as_slice() }
        .iter()
        .enumerate()
        .find(|(_, v)| RString::from_value(**v).is_none())
        .map(|(i, v)| (i, *v));
    match bad {
        None => Ok(array),
        Some((i, v)) => Err(type_error(format!(
            "enabled_tools must be an Array of Strings; element {i} is a {}",
            crate::class_name(v)
        ))),
    }
}

/// The tool names of an array [`check_tools`] accepted, copied into Rust.
///
/// # Safety
/// As for [`borrow`]: no Ruby code may run while this copies (it allocates nothing on the
/// Ruby heap itself).
pub unsafe fn tools_vec(ruby: &Ruby, tools: RArray) -> Result<Vec<String>, Error> {
    let mut out = Vec::with_capacity(tools.len());
    for v in tools.as_slice() {
        let s = RString::from_value(*v).ok_or_else(|| {
            Error::new(
                ruby.exception_type_error(),
                "enabled_tools changed while read",
            )
        })?;
        out.push(borrow(ruby, &s, "an enabled tool name")?.to_owned());
    }
    Ok(out)
}
