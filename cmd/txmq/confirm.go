package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/term"
)

// A destructive command (dlq purge) asks on a terminal for the word it names to be typed
// back, as the dashboard does; in a script (stdin not a terminal) it runs only with --yes, so
// that a pipeline never deletes on a prompt nobody reads.

// stdinIsTerminal says whether a person can answer on stdin.
func stdinIsTerminal() bool { return term.IsTerminal(int(os.Stdin.Fd())) }

// addYesFlag adds --yes to a destructive command.
func addYesFlag(fs *flag.FlagSet) *bool {
	return fs.Bool("yes", false, "do it without asking (required when stdin is not a terminal, as in scripts)")
}

// confirm returns nil when the operator agreed to what: --yes given, or word typed back on in
// when it is a terminal (the command passes os.Stdin and stdinIsTerminal()). Without --yes
// and without a terminal it is a usage error naming --yes; a wrong answer is an error saying
// nothing was done.
func confirm(yes bool, what, word string, in io.Reader, terminal bool, stderr io.Writer) error {
	if yes {
		return nil
	}
	if !terminal {
		return &usageError{msg: fmt.Sprintf("refusing to %s without confirmation: stdin is not a terminal; add --yes to confirm in a script", what)}
	}
	fmt.Fprintf(stderr, "This will %s. Type %q to confirm: ", what, word)
	line, err := bufio.NewReader(in).ReadString('\n')
	if strings.TrimSpace(line) == word {
		return nil
	}
	if err != nil && err != io.EOF {
		return fmt.Errorf("reading the confirmation: %w", err)
	}
	return fmt.Errorf("not confirmed (expected %q): nothing was done", word)
}
