//! The enabled tools of `detect`, checked and converted, and the one list remembered.
//!
//! `toolcall_detect::Input` takes the names as `&[String]`, so a call that needs them
//! copies them out of the Ruby Array. A frozen Array of frozen Strings can never change,
//! so the last such list a detection needed is kept, converted, together with the Array
//! itself: the next call given that very Array (the same object: an app's constant, or an
//! agent's list frozen once) skips the type checks and the copy, and runs `detect` at once
//! instead of `might_leak` first (one scan of a text that may leak, not two).
//!
//! Anything else (an Array not frozen, or holding a String that is not frozen) is checked
//! on every call, and copied when a text may leak: it may have changed since the last
//! call, in place. The Array kept is registered with the GC, which keeps it alive and
//! pinned, so no other object can take its address while it is remembered.

use crate::text;
use magnus::{rb_sys::AsRawValue, value::ReprValue, Error, RArray, RString, Ruby, Value};
use rb_sys::VALUE;
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, Once};

/// The Array remembered, in a slot the GC marks (nil when none).
struct Kept(UnsafeCell<VALUE>);
// SAFETY: only read or written with the GVL held, by this module and by the GC.
unsafe impl Sync for Kept {}

static KEPT: Kept = Kept(UnsafeCell::new(rb_sys::Qnil as VALUE));
static REGISTER: Once = Once::new();

/// The names of the Array in [`KEPT`]; `array` is that Array, to compare identities.
pub struct Remembered {
    array: VALUE,
    names: Vec<String>,
}

static REMEMBERED: Mutex<Option<Remembered>> = Mutex::new(None);

/// `REMEMBERED`'s `array` (0 when none), to compare without taking the lock.
static REMEMBERED_ARRAY: AtomicUsize = AtomicUsize::new(0);

/// Registers the slot of the remembered Array with the GC; called once, at load.
pub fn init() {
    // SAFETY: a static slot, holding a valid VALUE (nil), registered once.
    REGISTER.call_once(|| unsafe { rb_sys::rb_gc_register_address(KEPT.0.get()) });
}

/// The tool list of one `detect` call.
pub enum Tools {
    /// The very Array remembered: its names are ready.
    Remembered(MutexGuard<'static, Option<Remembered>>),
    /// An Array of Strings, type-checked, names not copied yet.
    Checked(RArray),
}

/// `value` as a tool list: the remembered one, or a type-checked Array (else `TypeError`).
pub fn get(ruby: &Ruby, value: Value) -> Result<Tools, Error> {
    // The identity first, without the lock: any other list goes straight to the checks.
    if REMEMBERED_ARRAY.load(Ordering::Relaxed) == value.as_raw() as usize {
        if let Ok(guard) = REMEMBERED.try_lock() {
            if guard.as_ref().is_some_and(|r| r.array == value.as_raw()) {
                return Ok(Tools::Remembered(guard));
            }
        }
    }
    text::check_tools(ruby, value).map(Tools::Checked)
}

impl Tools {
    /// The names, when this is the remembered Array (else [`Tools::copy`] them).
    pub fn remembered(&self) -> Option<&[String]> {
        match self {
            Tools::Remembered(guard) => guard.as_ref().map(|r| r.names.as_slice()),
            Tools::Checked(_) => None,
        }
    }

    /// The names copied into Rust (none for the remembered Array: see
    /// [`Tools::remembered`]); remembered for next time when the Array and every String
    /// in it are frozen.
    ///
    /// # Safety
    /// As for [`text::borrow`]: call it while no Ruby code runs (it allocates nothing on
    /// the Ruby heap itself).
    pub unsafe fn copy(&self, ruby: &Ruby) -> Result<Vec<String>, Error> {
        let Tools::Checked(array) = self else {
            return Ok(self
                .remembered()
                .map(<[String]>::to_vec)
                .unwrap_or_default());
        };
        let names = text::tools_vec(ruby, *array)?;
        let immutable = array.is_frozen()
            && array
                .as_slice()
                .iter()
                .all(|v| RString::from_value(*v).is_some_and(|s| s.is_frozen()));
        if immutable {
            if let Ok(mut guard) = REMEMBERED.try_lock() {
                // SAFETY: the GVL is held; the slot keeps the Array alive (and pinned)
                // for as long as it is remembered.
                *KEPT.0.get() = array.as_raw();
                *guard = Some(Remembered {
                    array: array.as_raw(),
                    names: names.clone(),
                });
                REMEMBERED_ARRAY.store(array.as_raw() as usize, Ordering::Relaxed);
            }
        }
        Ok(names)
    }
}
