package execclient

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"syscall"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/appserver/appserver/api"
)

// IsTerminal reports whether f is a terminal.
func IsTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// OpenTerminal opens the terminal stdin is, anew, so that reads can have
// deadlines (the poller takes a terminal opened this way) and a question
// left unanswered does not hold the process. It is nil when stdin is not
// a terminal. The caller closes it.
func OpenTerminal(stdin *os.File) (*os.File, error) {
	if !IsTerminal(stdin) {
		return nil, nil
	}
	// O_NOCTTY: never make it the controlling terminal of a process that
	// has none.
	f, err := os.OpenFile(stdin.Name(), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, fmt.Errorf("open the terminal: %w", err)
	}
	return f, nil
}

// ReadPrompt returns the prompt: the arguments joined, or stdin read to
// its end when the only argument is "-" or when there is none and stdin
// is not a terminal (a pipe or a file). A UTF-8 byte order mark is
// dropped; other encodings are refused.
func ReadPrompt(args []string, stdin io.Reader, stdinIsTerminal bool) (string, error) {
	prompt := strings.Join(args, " ")
	fromStdin := prompt == "-" || (len(args) == 0 && !stdinIsTerminal)
	if fromStdin {
		b, err := io.ReadAll(stdin)
		if err != nil {
			return "", fmt.Errorf("read the prompt from stdin: %w", err)
		}
		b = []byte(strings.TrimPrefix(string(b), "\uFEFF"))
		if !utf8.Valid(b) {
			return "", errors.New("the prompt on stdin is not UTF-8 text")
		}
		prompt = string(b)
	}
	if strings.TrimSpace(prompt) == "" {
		if fromStdin {
			return "", errors.New("the prompt on stdin is empty")
		}
		return "", errors.New(`exec needs a prompt: an argument, "-" or a pipe on stdin`)
	}
	return prompt, nil
}

// imageTypes are the image formats a model takes, by the type sniffed
// from the file's first bytes.
var imageTypes = map[string]bool{"image/png": true, "image/jpeg": true, "image/gif": true, "image/webp": true}

// imageInput reads an image file into an image input with a data: URL,
// so that the daemon, wherever it runs, sends the image itself to the
// model.
func imageInput(path string) (api.UserInput, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return api.UserInput{}, fmt.Errorf("--image: %w", err)
	}
	ct := http.DetectContentType(b)
	if !imageTypes[ct] {
		return api.UserInput{}, fmt.Errorf("--image %s: not a PNG, JPEG, GIF or WebP image (looks like %s)", path, ct)
	}
	return api.UserInput{Type: api.UserInputImage, URL: "data:" + ct + ";base64," + base64.StdEncoding.EncodeToString(b)}, nil
}
