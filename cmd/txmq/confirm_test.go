package main

import (
	"errors"
	"strings"
	"testing"
)

func TestConfirm(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		yes      bool
		terminal bool
		input    string
		wantErr  string // "" : confirmed
		usage    bool
	}{
		{name: "--yes", yes: true},
		{name: "--yes without a terminal", yes: true, terminal: false},
		{name: "script without --yes", wantErr: "--yes", usage: true},
		{name: "typed back", terminal: true, input: "emails\n"},
		{name: "typed back with spaces, no newline", terminal: true, input: "  emails "},
		{name: "wrong word", terminal: true, input: "email\n", wantErr: "nothing was done"},
		{name: "y is not the word", terminal: true, input: "y\n", wantErr: "nothing was done"},
		{name: "nothing typed", terminal: true, input: "", wantErr: "nothing was done"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var prompt strings.Builder
			err := confirm(tt.yes, `delete every dead letter of queue "emails"`, "emails", strings.NewReader(tt.input), tt.terminal, &prompt)
			var ue *usageError
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("confirm = %v; want confirmed", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("confirm = %v; want an error containing %q", err, tt.wantErr)
			case tt.usage != errors.As(err, &ue):
				t.Fatalf("confirm = %v (%T); usage error %v", err, err, tt.usage)
			}
			if asked := strings.Contains(prompt.String(), `Type "emails" to confirm`); asked != (tt.terminal && !tt.yes) {
				t.Errorf("prompt %q; want one only on a terminal without --yes", prompt.String())
			}
		})
	}
}
