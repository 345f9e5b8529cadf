package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/txmq/txmq/core"
)

// exit codes
const (
	exitOK    = 0
	exitError = 1 // the command ran and failed
	exitUsage = 2 // bad command line
)

// command is one subcommand.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

// usageError is a command-line mistake: printed with the usage, exit code 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

var commands = map[string]*command{}

func register(c *command) { commands[c.name] = c }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stdout)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "txmq: unknown command %q\n\n", args[0])
		usage(stderr)
		return exitUsage
	}
	err := c.run(ctx, args[1:], stdout, stderr)
	var ue *usageError
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "txmq %s: %s (see txmq %s --help)\n", c.name, ue.msg, c.name)
		return exitUsage
	default:
		fmt.Fprintf(stderr, "txmq %s: %s\n", c.name, message(err))
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && (pgErr.Code == "42P01" || pgErr.Code == "3F000") {
			fmt.Fprintln(stderr, "hint: txmq's tables are missing in this schema: run txmq migrate (with the same --schema) first")
		}
		return exitError
	}
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "txmq: durable background work, with the backend as a setting.")
	fmt.Fprintln(w, "\nUsage: txmq <command> [flags]\n\nCommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nRun txmq <command> --help for a command's flags.")
}

// newFlags returns a flag set that reports errors instead of exiting. Its usage (printed by
// --help and on a flag error) shows every default redacted (see redactDefaults).
func newFlags(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("txmq "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: txmq %s\n\n", synopsis)
		redactDefaults(fs)
		fs.PrintDefaults()
	}
	return fs
}

// redactDefaults replaces the secrets in the defaults of fs's flags with core.Redacted: the
// URL flags default to TXMQ_DATABASE_URL, TXMQ_BACKEND and TXMQ_DRAIN_BACKENDS, whose
// passwords and tokens must not reach the help text any more than a log or an error. A
// list flag (stringList: comma-separated URLs) is redacted element by element. Defaults
// without a secret are left as they are.
func redactDefaults(fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		if _, ok := f.Value.(*stringList); ok {
			parts := strings.Split(f.DefValue, ",")
			for i, p := range parts {
				parts[i] = core.Redact(p)
			}
			f.DefValue = strings.Join(parts, ",")
			return
		}
		f.DefValue = core.Redact(f.DefValue)
	})
}

// parse parses flags, allowing them before and after positional arguments ("dlq show 5
// --schema x"), and turns flag errors into usage errors. The positional arguments are left in
// fs.Args().
func parse(fs *flag.FlagSet, args []string) error {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return err
			}
			return &usageError{msg: strings.TrimPrefix(err.Error(), "flag provided but not defined: ")}
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		if rest[0] == "--" {
			positional = append(positional, rest[1:]...)
			break
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
	return fs.Parse(append([]string{"--"}, positional...))
}
