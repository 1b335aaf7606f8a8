//! placeholder
use crate::error::Error;
use crate::settings::LogFormat;
use std::io::Write;
/// x
#[derive(Debug, Clone, clap::Args)]
pub struct DemoArgs {
    /// Log format.
    #[arg(long, env = "TCR_LOG_FORMAT", value_enum, default_value_t = LogFormat::Pretty)]
    pub log_format: LogFormat,
}
/// x
pub async fn run(_args: &DemoArgs, _out: &mut (dyn Write + Send)) -> Result<(), Error> {
    Ok(())
}
