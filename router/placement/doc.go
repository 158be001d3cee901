// Package placement answers "which cell hosts this workspace, at which epoch" for the router,
// from memory whenever it can.
//
// A Cache sits in front of a Source (the directory database in production). It keeps three
// kinds of answer:
//
//   - fresh: a placement read less than TTL ago is used without asking the Source;
//   - stale: a placement older than TTL but younger than MaxStale is refreshed from the Source
//     first, and used as it is only if the Source fails (stale-if-error). After a failed
//     refresh the entry is not retried for StaleRetry, so a directory outage costs one slow
//     query per workspace per StaleRetry rather than one per request;
//   - with Config.Revalidate (on in the router binary: ROUTER_PLACEMENT_REVALIDATE), a placement past TTL but within MaxStale
//     is used at once and read again in the background (stale-while-revalidate): a workspace
//     used at least once per MaxStale never makes a request wait for the directory. A failed
//     background read marks the entry stale and the rules above apply;
//   - negative: a workspace the Source does not know is remembered for NegativeTTL, so probes
//     with random IDs cannot turn into a directory query each.
//
// Concurrent misses for one workspace share one Source query (singleflight), and that query is
// detached from the caller's cancellation so one impatient client cannot fail the others.
//
// The placements themselves live in a table of fixed-size records outside the Go heap
// (table.go): 48 bytes per workspace, nothing for the collector to scan.
//
// The cache is deliberately not authoritative: a cell that no longer hosts a workspace answers
// 421, and the router then calls Refresh. A placement cached a moment too long is therefore
// corrected by the next request that meets it; the cache never has to be perfectly coherent.
//
// This package must not know about HTTP, cells' health or the directory's schema.
package placement
