//! Reading the running worker's `/metrics` for the demo: one plain HTTP/1.0 GET (the
//! worker's own port, `http://` only) and the value of a sample in the text format.
//!
//! May depend on: `tokio` (the socket).

use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The body of `GET url` (`http://host:port/path`), or why not.
pub async fn get(url: &str) -> Result<String, String> {
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| format!("{url} is not an http:// URL"))?;
    let (host, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let path = if path.is_empty() { "/" } else { path };
    let fetch = async {
        let mut stream = tokio::net::TcpStream::connect(host).await?;
        let request = format!("GET {path} HTTP/1.0\r\nHost: {host}\r\n\r\n");
        stream.write_all(request.as_bytes()).await?;
        let mut response = Vec::new();
        stream.read_to_end(&mut response).await?;
        Ok::<_, std::io::Error>(String::from_utf8_lossy(&response).into_owned())
    };
    let response = tokio::time::timeout(Duration::from_secs(5), fetch)
        .await
        .map_err(|_| format!("{url} did not answer within 5 s"))?
        .map_err(|e| format!("cannot reach {url}: {e}"))?;
    let (head, body) = response
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("{url} sent no HTTP response"))?;
    let status = head.split(' ').nth(1).unwrap_or("");
    if status != "200" {
        return Err(format!("{url} answered {status}"));
    }
    Ok(body.to_string())
}

/// The value of the sample of metric `name` whose labels include every `labels` pair
/// (`mode="recover"`), from a Prometheus text page.
pub fn sample(page: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    page.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let rest = series.strip_prefix(name)?;
            let set = match rest.strip_prefix('{') {
                Some(set) => set.strip_suffix('}')?,
                None if rest.is_empty() => "",
                None => return None,
            };
            let has = |(k, v): &(&str, &str)| set.split(',').any(|p| p == format!("{k}=\"{v}\""));
            labels.iter().all(has).then(|| value.parse().ok())?
        })
        .next()
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: &str = "\
# HELP toolcall_recovery_events_total Events acked, by outcome.
# TYPE toolcall_recovery_events_total counter
toolcall_recovery_events_total{mode=\"observe\",outcome=\"recovered\"} 7
toolcall_recovery_events_total{mode=\"recover\",outcome=\"recovered\"} 2
toolcall_recovery_events_total_extra{mode=\"recover\",outcome=\"recovered\"} 9
toolcall_recovery_outbox_pending 0
";

    #[test]
    fn finds_the_sample_with_every_label_asked_for() {
        let recovered = [("mode", "recover"), ("outcome", "recovered")];
        assert_eq!(
            sample(PAGE, "toolcall_recovery_events_total", &recovered),
            Some(2.0)
        );
        assert_eq!(
            sample(PAGE, "toolcall_recovery_outbox_pending", &[]),
            Some(0.0)
        );
        assert_eq!(
            sample(PAGE, "toolcall_recovery_events_total", &[("mode", "x")]),
            None
        );
    }
}
