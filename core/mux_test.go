package core

import (
	"context"
	"errors"
	"strings"
	"testing"
)

func TestOpenBackendErrorsNeverShowSecrets(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{
		"bogus://u:hunter2@h/?password=hunter2",
		"%zz://u:hunter2@h",
	} {
		_, err := OpenBackend(context.Background(), raw)
		if !errors.Is(err, ErrInvalidConfig) || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("OpenBackend(%q): %v", raw, err)
		}
	}
}
