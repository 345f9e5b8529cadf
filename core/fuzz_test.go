package core

import (
	"encoding/json"
	"errors"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
)

// Fuzz targets: plain `go test` runs their seeds (f.Add and testdata/fuzz); scripts/fuzz runs
// each with -fuzz for a chosen time.

// envelopeSeeds are valid and broken envelopes for the decoder targets.
func envelopeSeeds(f *testing.F) {
	f.Helper()
	created := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	for _, e := range []*Envelope{
		{ID: "b1", Queue: "q", Created: created, MessageIDs: []string{"m1"}, Messages: []json.RawMessage{json.RawMessage(`"hi"`)}},
		{ID: "b2", Queue: "q\"<&>é", Attempt: 3, Created: created, Trace: map[string]string{"traceparent": "00-x"},
			MessageIDs: []string{"m1", "m\\2", "m3"}, Messages: []json.RawMessage{json.RawMessage(`{"a":1}`), json.RawMessage(`[1,2]`), json.RawMessage(`null`)}},
		{ID: "b3", Queue: "q", Created: created},
		{ID: "b4", Queue: "q", Created: created, Due: created.Add(time.Minute), MessageIDs: []string{"m1"}, Messages: []json.RawMessage{json.RawMessage(`1`)}},
	} {
		e.Version = EnvelopeVersion
		f.Add(EncodeEnvelope(e))
	}
	for _, s := range []string{
		``, `{}`, `null`, `[]`, `{"v":1}`, `{"v":2,"id":"b","q":"q","ids":[],"m":[]}`,
		`{"v":1,"id":"b","q":"q","ids":["a"],"m":[]}`,
		`{"v":1,"id":"b","q":"q","ids":[1],"m":[1]}`,
		`{"v":1,"id":"b","q":"q","ids":null,"m":null}`,
		`{"v":1,"id":"b","q":"q","ids":["a\"","b\\"],"m":[1,2]}`,
		`{"v":1,"id":"b","q":"q","ids":[ "a" , "b" ],"m":[1,2]}`,
		`{"v":1,"id":"b","q":"q","ids":["a"],"m":[1],"ids":["a","b"]}`,
		`{"v":1,"id":"b","q":"q","t":"not a time","ids":[],"m":[]}`,
		`{"v":1,"id":"b","q":"q","a":-1,"ids":["x"],"m":["y"]}`,
		`{"v":1,"id":"b","q":"q","t":"2026-01-02T03:04:05+01:00","nb":"2026-01-02T03:04:06.5-01:00","ids":["x"],"m":["y"]}`,
		`{"v":1,"id":"b","q":"q","t":"9999-12-31T23:00:00-02:00","ids":["x"],"m":["y"]}`,
		`{"v":1,"id":"b","q":"q","nb":"0000-01-01T00:30:00+01:00","ids":["x"],"m":["y"]}`,
	} {
		f.Add([]byte(s))
	}
}

// DecodeEnvelope never panics; what it accepts re-encodes to an envelope that decodes to the
// same batch, and the typed decoder (what listeners use) accepts it too, with the same header.
func FuzzDecodeEnvelope(f *testing.F) {
	envelopeSeeds(f)
	fastSeeds(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		e, err := DecodeEnvelope(body)
		typed, terr := decodeTyped[json.RawMessage](body)
		if err != nil {
			if !errors.Is(err, ErrUndecodable) {
				t.Fatalf("DecodeEnvelope error does not wrap ErrUndecodable: %v", err)
			}
			if terr != nil && !errors.Is(terr, ErrUndecodable) {
				t.Fatalf("decodeTyped error does not wrap ErrUndecodable: %v", terr)
			}
			return
		}
		if terr != nil {
			t.Fatalf("DecodeEnvelope accepts %q, decodeTyped refuses it: %v", body, terr)
		}
		if typed.ID != e.ID || typed.Queue != e.Queue || typed.Attempt != e.Attempt || int(typed.MessageIDs) != len(e.MessageIDs) || len(typed.Messages) != len(e.Messages) {
			t.Fatalf("decoders disagree on %q: %+v vs %+v", body, typed, e)
		}
		again, err := DecodeEnvelope(EncodeEnvelope(e))
		if err != nil {
			t.Fatalf("re-encoded %q does not decode: %v", body, err)
		}
		if !sameEnvelope(e, again) {
			t.Fatalf("round trip changed the batch:\n%+v\n%+v", e, again)
		}
	})
}

// The typed decoder never panics and never accepts what DecodeEnvelope refuses (other than
// for the message type: a struct target may refuse messages DecodeEnvelope keeps raw).
func FuzzDecodeTyped(f *testing.F) {
	envelopeSeeds(f)
	fastSeeds(f)
	type msg struct {
		A int    `json:"a"`
		S string `json:"s"`
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		_, rawErr := decodeTyped[json.RawMessage](body)
		_, structErr := decodeTyped[msg](body)
		_, strErr := decodeTyped[string](body)
		_, err := DecodeEnvelope(body)
		for _, e := range []error{rawErr, structErr, strErr} {
			if e != nil && !errors.Is(e, ErrUndecodable) {
				t.Fatalf("decodeTyped error does not wrap ErrUndecodable: %v", e)
			}
		}
		if err != nil && rawErr == nil {
			t.Fatalf("decodeTyped accepts %q, DecodeEnvelope refuses it: %v", body, err)
		}
	})
}

// ReencodeAttempt never panics; what it returns decodes to the same batch with the new attempt.
func FuzzReencodeAttempt(f *testing.F) {
	envelopeSeeds(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, attempt := range []int{0, 1, 7, -1, 1 << 40} {
			out, err := ReencodeAttempt(body, attempt)
			if err != nil {
				if !errors.Is(err, ErrUndecodable) {
					t.Fatalf("error does not wrap ErrUndecodable: %v", err)
				}
				return
			}
			before, _ := DecodeEnvelope(body)
			after, err := DecodeEnvelope(out)
			if err != nil {
				t.Fatalf("ReencodeAttempt(%q, %d) = %q, which does not decode: %v", body, attempt, out, err)
			}
			if after.Attempt != attempt {
				t.Fatalf("attempt %d, want %d", after.Attempt, attempt)
			}
			before.Attempt = attempt
			if !sameEnvelope(before, after) {
				t.Fatalf("ReencodeAttempt changed more than the attempt:\n%+v\n%+v", before, after)
			}
		}
	})
}

// SplitEnvelope never panics; its halves hold every message and id, in order, with the header.
func FuzzSplitEnvelope(f *testing.F) {
	envelopeSeeds(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		parts, err := SplitEnvelope(body)
		if err != nil {
			if !errors.Is(err, ErrUndecodable) && !errors.Is(err, ErrInvalidPayload) {
				t.Fatalf("error wraps neither ErrUndecodable nor ErrInvalidPayload: %v", err)
			}
			return
		}
		whole, _ := DecodeEnvelope(body)
		var ids []string
		var msgs []string
		for _, p := range parts {
			e, err := DecodeEnvelope(p)
			if err != nil {
				t.Fatalf("half %q does not decode: %v", p, err)
			}
			if e.Queue != whole.Queue || e.Attempt != whole.Attempt || e.ID == whole.ID || len(e.Messages) == 0 {
				t.Fatalf("half %+v of %+v", e, whole)
			}
			ids = append(ids, e.MessageIDs...)
			for _, m := range e.Messages {
				msgs = append(msgs, string(m))
			}
		}
		var want []string
		for _, m := range whole.Messages {
			want = append(want, string(m))
		}
		if !slices.Equal(ids, whole.MessageIDs) || !slices.Equal(msgs, want) {
			t.Fatalf("halves hold %v %v, want %v %v", ids, msgs, whole.MessageIDs, want)
		}
	})
}

func sameEnvelope(a, b *Envelope) bool {
	if a.Version != b.Version || a.ID != b.ID || a.Queue != b.Queue || a.Attempt != b.Attempt ||
		!a.Created.Equal(b.Created) || !a.Due.Equal(b.Due) || !slices.Equal(a.MessageIDs, b.MessageIDs) || len(a.Messages) != len(b.Messages) ||
		len(a.Trace) != len(b.Trace) {
		return false
	}
	for k, v := range a.Trace {
		if b.Trace[k] != v {
			return false
		}
	}
	for i := range a.Messages {
		if string(a.Messages[i]) != string(b.Messages[i]) {
			return false
		}
	}
	return true
}

// secretMark starts every secret the redaction targets insert; it appears nowhere else, so any
// occurrence in an output is a leak of (a part of) the secret.
const secretMark = "Zq9"

// redactForms builds texts holding secret (already marked) in every position Redact must hide.
// Each form holds the secret as given, except the unquoted connection-string one, which holds it
// without whitespace; the second result lists that secret.
func redactForms(scheme, user, secret string) (forms []string, unquoted string) {
	esc := url.QueryEscape(secret)
	hostURL := func(u *url.Userinfo, q string) string {
		return (&url.URL{Scheme: scheme, User: u, Host: "h:1", Path: "/db", RawQuery: q}).String()
	}
	unquoted = strings.Join(strings.Fields(secret), "")
	forms = []string{
		hostURL(url.UserPassword(user, secret), "txmq_prefix=p"),
		hostURL(nil, "password="+esc),
		hostURL(nil, "txmq_prefix=p&sslpassword="+esc+"&sslmode=disable"),
		hostURL(nil, "token="+esc),
		hostURL(nil, "txmq_secret_key="+esc),
		hostURL(nil, "txmq_nkey="+esc),
		hostURL(nil, "txmq_servers="+url.QueryEscape("nats://"+url.User(secret).String()+"@b:4222,nats://"+url.UserPassword("u", secret).String()+"@c:4222")),
		hostURL(nil, "txmq_endpoint="+url.QueryEscape((&url.URL{Scheme: "http", User: url.UserPassword("u", secret), Host: "e:1"}).String())),
		url.UserPassword(user, secret).String() + "@h:6379/0",
		"host=h user=u password='" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(secret) + "' dbname=d",
		"host=h sslpassword=" + unquoted + " port=1",
	}
	if !strings.Contains(user, "=") { // else it reads as a keyword/value connection string
		forms = append(forms, user+":"+secret+"@h:1")
	}
	// Written without escaping: the URL may no longer parse, or mean something else. (A secret
	// holding "?name=scheme://" unescaped cannot be told from a URL-valued parameter.)
	if !strings.Contains(secret, "://") {
		forms = append(forms, scheme+"://"+user+":"+secret+"@h:1/db")
	}
	if !strings.EqualFold(scheme, "postgres") && !strings.EqualFold(scheme, "postgresql") {
		forms = append(forms, hostURL(url.User(secret), ""))
		if !strings.Contains(secret, ":") { // else the part before ":" is a user name, as written (and no "://")
			forms = append(forms, scheme+"://"+secret+"@h:1/db?x=1")
		}
	}
	return forms, unquoted
}

// Redact never panics on any text, and never shows a secret placed in any position it must
// hide (see redactForms), however the secret is written; RedactText removes it from a
// message quoting the text, and RedactError from an error.
func FuzzRedact(f *testing.F) {
	for _, s := range []struct{ scheme, user, secret, raw string }{
		{"redis", "u", "hunter2", "redis://u:hunter2@h:6379/0"},
		{"nats", "", "tok", "nats://tok@h:4222"},
		{"postgres", "app", "p@ss/w?rd#1", "host=h password='a b'"},
		{"sqs", "AKID", "s3:cr%et", "sqs://K:S@us-east-1?txmq_endpoint=http://127.0.0.1:4566"},
		{"memory", "", "", "memory://"},
		{"x", "a:b", " \t'\\\"", "%zz://u:p@h"},
		{"nosuch", "u", "a,b&c=d", "u:p@h:6379"},
	} {
		f.Add(s.scheme, s.user, s.secret, s.raw)
	}
	f.Fuzz(func(t *testing.T, scheme, user, secret, raw string) {
		_ = Redact(raw)
		_ = RedactText(raw, raw)
		if !schemeRE.MatchString(scheme) || strings.Contains(scheme+user, secretMark) || strings.ContainsAny(user, ":@/?#") {
			return
		}
		secret = secretMark + secret
		if strings.Contains(secret, Redacted) {
			return
		}
		forms, unquoted := redactForms(scheme, user, secret)
		for _, form := range forms {
			if got := Redact(form); strings.Contains(got, secretMark) {
				t.Fatalf("Redact(%q) = %q: the secret %q shows", form, got, secret)
			}
			sec := secret
			if strings.HasPrefix(form, "host=h sslpassword=") {
				sec = unquoted
			}
			if got := RedactText("failed: "+form+" "+sec, form); strings.Contains(got, sec) {
				t.Fatalf("RedactText(..., %q) = %q: the secret %q shows", form, got, sec)
			}
			if err := RedactError(errors.New("failed: "+sec), form); strings.Contains(err.Error(), sec) {
				t.Fatalf("RedactError(..., %q) = %v: the secret %q shows", form, err, sec)
			}
		}
	})
}
