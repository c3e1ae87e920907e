// Package logging builds kobe's zap loggers and adapts them to the Temporal SDK and server.
package logging

import (
	"fmt"
	"os"
	"strings"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// New builds a logger writing to stderr. format is "console" or "json"; level is a zap level name.
func New(format, level string) (*zap.Logger, error) {
	var lvl zapcore.Level
	if err := lvl.UnmarshalText([]byte(strings.ToLower(level))); err != nil {
		return nil, fmt.Errorf("--log-level %q: must be one of debug, info, warn, error", level)
	}
	var enc zapcore.Encoder
	switch format {
	case "json":
		cfg := zap.NewProductionEncoderConfig()
		cfg.EncodeTime = zapcore.ISO8601TimeEncoder
		enc = zapcore.NewJSONEncoder(cfg)
	case "console", "":
		cfg := zap.NewDevelopmentEncoderConfig()
		cfg.EncodeTime = zapcore.TimeEncoderOfLayout("15:04:05.000")
		cfg.EncodeLevel = zapcore.CapitalColorLevelEncoder
		if !isTerminal(os.Stderr) {
			cfg.EncodeLevel = zapcore.CapitalLevelEncoder
		}
		enc = zapcore.NewConsoleEncoder(cfg)
	default:
		return nil, fmt.Errorf("--log-format %q: must be console or json", format)
	}
	core := zapcore.NewCore(enc, zapcore.Lock(os.Stderr), lvl)
	return zap.New(core), nil
}

func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// SDKLogger adapts zap to go.temporal.io/sdk/log.Logger (key-value pairs after the message).
type SDKLogger struct{ s *zap.SugaredLogger }

// NewSDKLogger wraps l for the Temporal SDK.
func NewSDKLogger(l *zap.Logger) *SDKLogger {
	return &SDKLogger{s: l.WithOptions(zap.AddCallerSkip(1)).Sugar()}
}

func (l *SDKLogger) Debug(msg string, keyvals ...any) { l.s.Debugw(msg, keyvals...) }
func (l *SDKLogger) Info(msg string, keyvals ...any)  { l.s.Infow(msg, keyvals...) }
func (l *SDKLogger) Warn(msg string, keyvals ...any)  { l.s.Warnw(msg, keyvals...) }
func (l *SDKLogger) Error(msg string, keyvals ...any) { l.s.Errorw(msg, keyvals...) }
