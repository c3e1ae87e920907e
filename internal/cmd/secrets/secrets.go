// Package secrets implements `kobe secrets`: the key file that seals credentials in kobe's
// store (init, and adding a key), and re-sealing the store's values with its newest key
// (rotate).
package secrets

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/spf13/cobra"

	"github.com/kunobi-ninja/kobe/backends/leasecred"
	"github.com/kunobi-ninja/kobe/internal/cmd/factory"
	"github.com/kunobi-ninja/kobe/internal/cmd/output"
	"github.com/kunobi-ninja/kobe/internal/config"
	"github.com/kunobi-ninja/kobe/internal/secretbox"
	"github.com/kunobi-ninja/kobe/internal/store"
)

// NewCmdSecrets returns `kobe secrets` and its subcommands.
func NewCmdSecrets(f *factory.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "secrets <command>",
		Short: "The keys that seal credentials in kobe's store: init, rotate",
		Long: `kobe seals the lease kubeconfigs and prepared credentials it stores with the keys of a key
file (--secret-key-file, env KOBE_SECRET_KEY_FILE) that the server and every worker share: one
base64 key per line, oldest first; the last key seals, every key opens. Only "kobe secrets
init" and kobe dev create one. The store records the sealing key's fingerprint: a server or
worker whose key file does not hold it is refused at start.

Rotating: add a key (kobe secrets init --add-key), give the new file to the server and every
worker and restart them, run "kobe secrets rotate" to re-seal every value with the new key,
then remove the old key's line from the file (docs/production.md, "Sealing keys").`,
		Example: `  kobe secrets init --secret-key-file /etc/kobe/secret.key
  kobe secrets init --secret-key-file /etc/kobe/secret.key --add-key
  kobe secrets rotate --store postgres://kobe@db/kobe --secret-key-file /etc/kobe/secret.key`,
	}
	cmd.AddCommand(NewCmdInit(f, nil), NewCmdRotate(f, nil))
	return cmd
}

// fromEnv fills a flag not given on the command line from its KOBE_* variable.
func fromEnv(cmd *cobra.Command, flag string, value *string) {
	if !cmd.Flags().Changed(flag) {
		if v := os.Getenv(config.EnvName(flag)); v != "" {
			*value = v
		}
	}
}

// InitOptions of `kobe secrets init`.
type InitOptions struct {
	Factory *factory.Factory
	KeyFile string
	AddKey  bool
}

// NewCmdInit builds `kobe secrets init`; runF replaces the behaviour in tests.
func NewCmdInit(f *factory.Factory, runF func(*InitOptions) error) *cobra.Command {
	opts := &InitOptions{Factory: f}
	cmd := &cobra.Command{
		Use:   "init --secret-key-file FILE",
		Short: "Create the key file (or add a new key to it)",
		Long: `Create the key file with one new key (mode 0600). A file that exists is kept as it is (its
keys may have sealed what the store holds): the command says so and succeeds, so that a
deployment may run it at every install. With --add-key, a new key is appended to an existing
file: it becomes the key that seals, and the older ones still open.`,
		Example: `  kobe secrets init --secret-key-file /etc/kobe/secret.key
  kobe secrets init --secret-key-file /etc/kobe/secret.key --add-key`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			fromEnv(cmd, "secret-key-file", &opts.KeyFile)
			if opts.KeyFile == "" {
				return fmt.Errorf("%s: --secret-key-file is required (env %s)", cmd.CommandPath(), config.EnvName("secret-key-file"))
			}
			if runF != nil {
				return runF(opts)
			}
			return initRun(opts)
		},
	}
	cmd.Flags().StringVar(&opts.KeyFile, "secret-key-file", "", "the key file (env "+config.EnvName("secret-key-file")+")")
	cmd.Flags().BoolVar(&opts.AddKey, "add-key", false, "append a new key to the existing file: it seals from now on")
	return cmd
}

func initRun(opts *InitOptions) error {
	out := opts.Factory.IOStreams.Out
	if opts.AddKey {
		box, err := secretbox.AddKey(opts.KeyFile)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "added key %s to %s: it seals from now on; the file holds %d keys\n", box.Fingerprint(), opts.KeyFile, len(box.Fingerprints()))
		return nil
	}
	box, err := secretbox.CreateKeyFile(opts.KeyFile)
	if errors.Is(err, os.ErrExist) {
		existing, err := secretbox.LoadKeyFile(opts.KeyFile)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "%s exists (sealing key %s): kept as it is\n", opts.KeyFile, existing.Fingerprint())
		return nil
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "created %s with key %s: give the same file to the server and every worker\n", opts.KeyFile, box.Fingerprint())
	return nil
}

// RotateOptions of `kobe secrets rotate`.
type RotateOptions struct {
	Factory *factory.Factory
	Store   string
	KeyFile string
	Output  *output.Format
}

// RotateView is what `kobe secrets rotate -o json` prints.
type RotateView struct {
	// Key is the fingerprint of the key every value is now sealed with.
	Key string `json:"key"`
	// Resealed values were sealed with an older key; Current ones already were with Key;
	// Changed ones were rewritten or deleted by kobe meanwhile (a new value is sealed with the
	// newest key anyway).
	Resealed int `json:"resealed"`
	Current  int `json:"current"`
	Changed  int `json:"changed"`
}

// NewCmdRotate builds `kobe secrets rotate`; runF replaces the behaviour in tests.
func NewCmdRotate(f *factory.Factory, runF func(*RotateOptions) error) *cobra.Command {
	opts := &RotateOptions{Factory: f}
	cmd := &cobra.Command{
		Use:   "rotate --store DSN --secret-key-file FILE",
		Short: "Re-seal every sealed value of the store with the key file's newest key",
		Long: `Re-seal every lease credential and prepared credential of the store with the newest key of the
key file, and record that key as the store's sealing key. A value already sealed with it is
left alone, so the command can be run again, or again after it was stopped, and finishes what
is left. Run it while kobe runs, once the server and every worker hold the new key file; then
the older keys can be removed from the file. A value that does not open with any key of the
file stops it, naming the value.`,
		Example: `  kobe secrets rotate --store postgres://kobe@db/kobe --secret-key-file /etc/kobe/secret.key`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			fromEnv(cmd, "store", &opts.Store)
			fromEnv(cmd, "secret-key-file", &opts.KeyFile)
			if opts.Store == "" || opts.KeyFile == "" {
				return fmt.Errorf("%s: --store and --secret-key-file are required (env %s, %s)", cmd.CommandPath(),
					config.EnvName("store"), config.EnvName("secret-key-file"))
			}
			if _, err := store.ParseDSN(opts.Store); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return rotateRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Store, "store", "", "the store's DSN (env "+config.EnvName("store")+")")
	cmd.Flags().StringVar(&opts.KeyFile, "secret-key-file", "", "the key file the server and the workers share (env "+config.EnvName("secret-key-file")+")")
	opts.Output = output.AddFlag(cmd, "text", output.JSON, output.YAML)
	return cmd
}

func rotateRun(ctx context.Context, opts *RotateOptions) error {
	box, err := secretbox.LoadKeyFile(opts.KeyFile)
	if err != nil {
		return err
	}
	st, err := store.OpenCurrent(ctx, opts.Store)
	if err != nil {
		return err
	}
	defer st.Close()
	recorded, err := st.SealingKey(ctx)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	if recorded != "" && !slices.Contains(box.Fingerprints(), recorded) {
		return fmt.Errorf("%s does not hold the store's sealing key %s (it holds %v): rotate with the key file the server and the workers use",
			opts.KeyFile, recorded, box.Fingerprints())
	}
	view := RotateView{Key: box.Fingerprint()}
	values, err := st.SealedValues(ctx)
	if err != nil {
		return err
	}
	for _, v := range values {
		if secretbox.SealedBy(v.Sealed) == view.Key {
			view.Current++
			continue
		}
		resealed, err := leasecred.Reseal(box, v)
		if err != nil {
			return fmt.Errorf("re-sealing (%d done): %w", view.Resealed, err)
		}
		replaced, err := st.ReplaceSealed(ctx, v, resealed)
		if err != nil {
			return fmt.Errorf("re-sealing %s of %s (%d done): %w", v.Kind, v.ID, view.Resealed, err)
		}
		if replaced {
			view.Resealed++
		} else {
			view.Changed++
		}
	}
	if recorded != view.Key {
		if _, err := st.RecordSealingKey(ctx, recorded, view.Key); err != nil {
			return fmt.Errorf("recording the store's sealing key: %w", err)
		}
	}
	ios := opts.Factory.IOStreams
	return opts.Output.Print(ios.Out, view, func(w io.Writer) error {
		_, err := fmt.Fprintf(w, "re-sealed %d values with key %s (%d already were, %d changed meanwhile)\n",
			view.Resealed, view.Key, view.Current, view.Changed)
		return err
	})
}
