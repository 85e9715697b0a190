//! The server's INFO callback: the `extern "C"` trampoline that hands a section writer to the
//! module's [`Report`].

use std::os::raw::c_int;

use redis_module::{raw, Context};

/// What the module reports in `INFO <module name>`.
pub(crate) trait Report {
    fn report(info: &mut Info);
}

/// Writes sections and fields of the INFO reply being built.
pub(crate) struct Info {
    ctx: *mut raw::RedisModuleInfoCtx,
    for_crash_report: bool,
}

impl Info {
    /// Starts section `<module>_<name>`; false if the server does not want it (INFO asked for
    /// another section): its fields are then left out.
    pub(crate) fn section(&mut self, name: &str) -> bool {
        raw::add_info_section(self.ctx, Some(name)) == raw::Status::Ok
    }

    /// Whether the server is writing its crash report: the module may be stopped anywhere, a
    /// lock it holds included, so a report must take none.
    pub(crate) fn for_crash_report(&self) -> bool {
        self.for_crash_report
    }

    pub(crate) fn text(&mut self, name: &str, value: &str) {
        raw::add_info_field_str(self.ctx, name, value);
    }

    pub(crate) fn count(&mut self, name: &str, value: u64) {
        raw::add_info_field_unsigned_long_long(self.ctx, name, value);
    }

    /// One line of counts, `name:a=1,b=2` (as Redis's `db0:keys=..,expires=..`).
    pub(crate) fn dict(&mut self, name: &str, counts: &[(&str, u64)]) {
        raw::add_info_begin_dict_field(self.ctx, name);
        for &(field, value) in counts {
            raw::add_info_field_unsigned_long_long(self.ctx, field, value);
        }
        raw::add_info_end_dict_field(self.ctx);
    }
}

extern "C" fn trampoline<R: Report>(ctx: *mut raw::RedisModuleInfoCtx, for_crash_report: c_int) {
    R::report(&mut Info {
        ctx,
        for_crash_report: for_crash_report != 0,
    });
}

/// Registers `R` as the module's INFO callback, at load.
pub(crate) fn register<R: Report>(ctx: &Context) {
    raw::register_info_function(ctx.ctx, Some(trampoline::<R>));
}
