// Package ui is txmq's web dashboard for operators: the queues (ready, in flight and delayed
// batches, dead letters, outbox backlog, paused; the busy queues the backend lists through
// core.QueueLister included) with pause and resume, and the dead letters (filter, show the decoded
// messages, replay one or a queue's, purge with confirmation), and the messages (look one up by
// id, list them by queue, state and publish time a page at a time, cancel one or every
// message of a queue in a waiting state after its name is typed back, run delayed or
// retrying ones now where the backend can, with each
// payload the backend still holds, rendered by Options.FormatPayload) through
// Options.Inspector, the API `txmq msg` uses; when no lookup is possible the page shows why;
// and the schedules (last and
// next tick of each, as `txmq schedule ls`), and the nodes (each node's heartbeat from the
// app database: its queues with their slots in use and caps, its version, when it was last
// seen, and stale after three missed beats). It is server-rendered HTML from
// embedded templates, readable without JavaScript, over the same API the command line uses.
//
// An app mounts it under its own mux (and its own auth):
//
//	h, err := ui.ForApp(app, &ui.Options{ReadOnly: true})
//	mux.Handle("/txmq/", http.StripPrefix("/txmq", h))
//
// or an operator runs `txmq ui --listen 127.0.0.1:8080` against the app database and backend.
//
// # Security
//
// Without auth (Options.User unset) anyone whose requests reach the dashboard reads its pages,
// the messages' payloads included (unless Options.HidePayloads), and (unless Options.ReadOnly) changes
// queues. The checks, in order:
//
//   - Host (421 Misdirected Request on every route, reads included): the dashboard answers only
//     to the IP the connection came in on and the loopback names (localhost, 127.0.0.1, [::1])
//     on the port it came in on, and to Options.AllowedHosts (e.g. a reverse proxy's name).
//     This is what stops DNS rebinding: a foreign page whose name was made to resolve to the
//     dashboard's address is same-origin with it, so it can read the CSRF token and pass the
//     Origin check, but its requests carry the foreign name as Host. Options.HostCheck
//     decides when it applies: by default (HostCheckAuto) Handler checks unless basic auth is
//     on (a rebinding page has no credentials), and ForApp does not check, since the app's
//     own auth and routing stand in front of a mounted dashboard and it is served under the
//     app's names; an app that mounts it without auth sets HostCheckOn.
//   - Fetch metadata, where the browser sends it (403): a change must come from the
//     dashboard's own page (Sec-Fetch-Site same-origin); a read from another site must be a
//     top-level navigation (a link followed), not a subresource, a script's fetch or a frame.
//   - Basic auth, when Options.User is set (401).
//   - Every change is a POST whose form carries a CSRF token: an HMAC, under a per-Handler
//     random key (Options.SigningKey to share one), of the session's SameSite=Strict cookie
//     (and of the basic-auth user), so that a cookie planted from a sibling origin cannot be
//     repeated as a token; its Origin, when sent, must be the request's own host.
//   - The banner a change leaves on the page it redirects to (?msg=) is one of a fixed set of
//     messages, its arguments signed for the session: a link cannot make the dashboard show a
//     text of its own.
//
// Options.ReadOnly hides and refuses every change, but still shows the payloads;
// Options.HidePayloads leaves them out of every page. Pages never show a URL or a secret.
package ui
