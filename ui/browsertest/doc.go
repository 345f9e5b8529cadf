// Package browsertest drives txmq's dashboard (package ui) in headless Chromium:
// TestDashboardInBrowser, which saves a screenshot per step under ui/testoutput. It is a
// module of its own (github.com/txmq/txmq/ui/browsertest) so that chromedp stays out of the
// txmq module's requirements, and so out of the module graph of every app that uses txmq.
package browsertest
