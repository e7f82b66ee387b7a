//! Source: Events reported by a component named for the owner. One from
//! the last two minutes shows it running; one from the last ten minutes
//! shows it was running a moment ago and may be restarting (`Unknown`).

use k8s_openapi::api::core::v1::Event;
use k8s_openapi::jiff::Timestamp;

use super::{Ctx, INSTALLED_SECS, RECENT_SECS, fmt_secs, unreadable, verdict::SourceReport};

fn when(e: &Event) -> Option<Timestamp> {
    e.series
        .as_ref()
        .and_then(|s| s.last_observed_time.as_ref())
        .map(|t| t.0)
        .or_else(|| e.last_timestamp.as_ref().map(|t| t.0))
        .or_else(|| e.event_time.as_ref().map(|t| t.0))
        .or_else(|| e.first_timestamp.as_ref().map(|t| t.0))
        .or_else(|| e.metadata.creation_timestamp.as_ref().map(|t| t.0))
}

pub(super) fn check(ctx: &Ctx) -> SourceReport {
    let s = ctx.snapshot;
    let mut r = SourceReport {
        unreadable: unreadable(s, "events", "v1"),
        ..SourceReport::default()
    };
    let mut older = 0;
    for e in &s.events {
        let reporters = [
            e.source.as_ref().and_then(|s| s.component.as_deref()),
            e.reporting_component.as_deref(),
        ];
        let Some((reporter, how)) = reporters
            .into_iter()
            .flatten()
            .find_map(|c| ctx.target.named_in(c).map(|m| (c, m)))
        else {
            continue;
        };
        let Some(at) = when(e) else {
            continue;
        };
        let age = s.age_of(at).as_secs();
        let o = &e.involved_object;
        let line = format!(
            "event {} {:?} from {reporter:?} ({how}) about {} {}, {} ago",
            e.type_.as_deref().unwrap_or_default(),
            e.reason.as_deref().unwrap_or_default(),
            o.kind.as_deref().unwrap_or_default(),
            o.name.as_deref().unwrap_or_default(),
            fmt_secs(age)
        );
        if age <= RECENT_SECS {
            r.alive.push(line);
        } else if age < INSTALLED_SECS {
            r.installed.push(format!(
                "{line}: reported less than 10 minutes ago, it may be restarting"
            ));
        } else {
            older += 1;
        }
    }
    r.checked = format!(
        "events: none in the last 10 minutes from a component named for {} ({} events checked{})",
        ctx.target.describe(),
        s.events.len(),
        if older > 0 {
            format!(", {older} older ones from it")
        } else {
            String::new()
        }
    );
    r
}
