// Package ui is txmq's web dashboard for operators: the queues (ready, in flight, delayed, dead,
// outbox backlog, paused) with pause and resume, and the dead letters (filter, show the decoded
// messages, replay one or a queue's, purge with confirmation), and the messages (look one up by
// id, list them by queue, state and publish time, cancel one) through Options.Inspector, the API
// `txmq msg` uses; when no lookup is possible the page shows why. It is server-rendered HTML from
// embedded templates, readable without JavaScript, over the same API the command line uses.
//
// An app mounts it under its own mux (and its own auth):
//
//	h, err := ui.ForApp(app, &ui.Options{ReadOnly: true})
//	mux.Handle("/txmq/", http.StripPrefix("/txmq", h))
//
// or an operator runs `txmq ui --listen 127.0.0.1:8080` against the app database and backend.
//
// Security: every change is a POST carrying a CSRF token (a SameSite=Strict cookie that the
// form must repeat) from the same origin; Options.User and Password require HTTP basic auth;
// Options.ReadOnly hides and refuses every change; pages never show a URL or a secret.
package ui
