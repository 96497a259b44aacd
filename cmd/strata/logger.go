package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
)

// logLevels and logFormats are the values --log-level and --log-format
// take.
var (
	logLevels  = []string{"debug", "info", "warn", "error"}
	logFormats = []string{"text", "json"}
)

// newLogger is the logger on stderr for --log-level and --log-format; a
// bad value gets an error naming the valid ones.
func newLogger(level, format string) (*slog.Logger, error) {
	return newLoggerTo(os.Stderr, level, format)
}

func newLoggerTo(w io.Writer, level, format string) (*slog.Logger, error) {
	var lv slog.Level
	switch strings.ToLower(level) {
	case "debug":
		lv = slog.LevelDebug
	case "info":
		lv = slog.LevelInfo
	case "warn", "warning":
		lv = slog.LevelWarn
	case "error":
		lv = slog.LevelError
	default:
		return nil, fmt.Errorf("--log-level %q: want one of %s", level, strings.Join(logLevels, ", "))
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch strings.ToLower(format) {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want one of %s", format, strings.Join(logFormats, ", "))
}
