package files

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"image"
	"image/draw"
	_ "image/gif" // decoded, re-encoded as PNG
	"image/jpeg"
	"image/png"
	"io"
	"math"
	"syscall"
	"time"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/fsguard"
	"github.com/appserver/appserver/internal/registry"
)

// ViewImageName is the tool name.
const ViewImageName = "view_image"

// view_image limits.
const (
	// MaxImageWidth and MaxImageHeight bound the image sent to the model;
	// larger images are scaled down to fit, keeping the aspect ratio (the
	// reference's 2048x768).
	MaxImageWidth = 2048
	// MaxImageHeight is the height bound of the image sent to the model.
	MaxImageHeight = 768
	// DefaultMaxImageBytes caps the size of the image file read.
	DefaultMaxImageBytes = 20 << 20
	// DefaultMaxImagePixels caps the decoded size (width × height), so a
	// small file cannot expand into gigabytes.
	DefaultMaxImagePixels = 64 << 20
)

// buildViewImageSpec builds ViewImageSpec's value.
func buildViewImageSpec() registry.FunctionSpec {
	props := map[string]*registry.Schema{
		"path": registry.String("Path of the image file on the local disk."),
	}
	return registry.FunctionSpec{
		Name:        ViewImageName,
		Description: "Look at an image file that is on the local disk (PNG, JPEG or GIF) when you need to see it; the image is attached to your next input.",
		Parameters:  registry.Object(props, []string{"path"}, registry.AllowAdditional(false)),
	}
}

var viewImageSpecStatic = registry.Static(buildViewImageSpec)

// ViewImageSpec returns view_image's spec (strict:false), of the same shape
// as codex-cli 0.169's.
// It is built once and shared (registry.Static).
func ViewImageSpec() registry.FunctionSpec { return viewImageSpecStatic() }

// ViewImage is the view_image handler: it loads a local PNG, JPEG or GIF
// image and answers it as an input_image content item holding a data URL,
// which the next model request carries. The zero value reads below the
// turn's cwd, with nothing masked.
type ViewImage struct {
	// Items, when set, receives the imageView item of each successful call
	// (item/started then item/completed).
	Items ItemSink
	// MaxBytes caps the file size; 0 means DefaultMaxImageBytes.
	MaxBytes int64
	// MaxPixels caps width × height; 0 means DefaultMaxImagePixels.
	MaxPixels int64
	// Guard refuses the daemon's own paths; nil masks nothing.
	Guard *fsguard.Guard
	// Access returns what a call may read; nil is the turn's cwd.
	Access AccessFunc
	// Now is the clock of item timestamps; nil uses time.Now.
	Now func() time.Time
}

var _ registry.Handler = (*ViewImage)(nil)

// Register adds view_image to b (parallel-capable).
func (h *ViewImage) Register(b *registry.Builder) error {
	return b.Register(ViewImageSpec(), h, true)
}

// Kind returns registry.PayloadFunction.
func (*ViewImage) Kind() registry.PayloadKind { return registry.PayloadFunction }

// IsMutating returns false.
func (*ViewImage) IsMutating(context.Context, registry.Invocation) bool { return false }

// errUnsupportedImage is the reference answer to a file that is not an
// image it can read.
var errUnsupportedImage = errors.New("unable to process image: the file is not a PNG, JPEG or GIF image, or it is damaged")

// Handle resolves the path against the turn cwd, loads the image (scaled to
// fit 2048x768 when larger) and answers [{"type":"input_image","image_url":
// "data:<mime>;base64,…"}].
func (h *ViewImage) Handle(ctx context.Context, inv registry.Invocation) (registry.Output, error) {
	raw, err := functionArgs(ViewImageName, inv)
	if err != nil {
		return registry.Output{}, err
	}
	var a struct {
		Path *string `json:"path"`
	}
	if err := registry.DecodeArguments(raw, &a); err != nil {
		return registry.Output{}, err
	}
	if a.Path == nil {
		return registry.Output{}, registry.ArgumentsError(errors.New("missing field `path`"))
	}
	abs := resolvePath(inv.Turn.Cwd, *a.Path)
	started := h.now()
	url, err := h.load(ctx, accessOf(h.Access, inv), abs)
	if err != nil {
		return registry.Output{}, err
	}
	if h.Items != nil {
		startMs := started.UnixMilli()
		item := api.ThreadItem{Body: &api.ImageViewItem{ID: inv.CallID, Path: abs}, StartedAtMs: &startMs}
		h.Items.ItemStarted(item)
		doneMs := h.now().UnixMilli()
		item.CompletedAtMs = &doneMs
		h.Items.ItemCompleted(item)
	}
	return registry.ContentOutput([]registry.ContentItem{registry.InputImage(url)}, true), nil
}

func (h *ViewImage) now() time.Time {
	if h.Now != nil {
		return h.Now()
	}
	return time.Now()
}

// load reads, checks and (when too large) scales the image, returning its
// data URL.
func (h *ViewImage) load(ctx context.Context, a fsguard.Access, abs string) (string, error) {
	f, err := h.Guard.OpenRead(ctx, a, abs)
	switch {
	case errors.Is(err, fsguard.ErrDenied):
		return "", err
	case errors.Is(err, fsguard.ErrNotRegular), errors.Is(err, syscall.EISDIR):
		return "", fmt.Errorf("image path `%s` is not a file", abs)
	case err != nil:
		return "", fmt.Errorf("unable to locate image at `%s`: %s", abs, ioErrorText(err))
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("unable to read image at `%s`: %s", abs, ioErrorText(err))
	}
	maxBytes := h.MaxBytes
	if maxBytes <= 0 {
		maxBytes = DefaultMaxImageBytes
	}
	if st.Size() > maxBytes {
		return "", fmt.Errorf("unable to process image at `%s`: the file is %d bytes, more than the %d-byte limit", abs, st.Size(), maxBytes)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxBytes+1))
	if err != nil {
		return "", fmt.Errorf("unable to read image at `%s`: %s", abs, ioErrorText(err))
	}
	if int64(len(data)) > maxBytes {
		return "", fmt.Errorf("unable to process image at `%s`: the file is more than the %d-byte limit", abs, maxBytes)
	}
	cfg, format, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return "", errUnsupportedImage
	}
	maxPixels := h.MaxPixels
	if maxPixels <= 0 {
		maxPixels = DefaultMaxImagePixels
	}
	if cfg.Width <= 0 || cfg.Height <= 0 || int64(cfg.Width)*int64(cfg.Height) > maxPixels {
		return "", fmt.Errorf("unable to process image at `%s`: %dx%d pixels is more than the %d-pixel limit", abs, cfg.Width, cfg.Height, maxPixels)
	}
	fits := cfg.Width <= MaxImageWidth && cfg.Height <= MaxImageHeight
	if fits && (format == "png" || format == "jpeg") {
		return dataURL("image/"+format, data), nil
	}
	img, _, err := image.Decode(bytes.NewReader(data))
	if err != nil {
		return "", errUnsupportedImage
	}
	if !fits {
		w, hgt := fitDimensions(cfg.Width, cfg.Height, MaxImageWidth, MaxImageHeight)
		img = resize(img, w, hgt)
	}
	var buf bytes.Buffer
	mime := "image/png"
	if format == "jpeg" {
		mime = "image/jpeg"
		err = jpeg.Encode(&buf, img, &jpeg.Options{Quality: 85})
	} else {
		err = png.Encode(&buf, img)
	}
	if err != nil {
		return "", fmt.Errorf("unable to process image at `%s`: %v", abs, err)
	}
	return dataURL(mime, buf.Bytes()), nil
}

func dataURL(mime string, data []byte) string {
	return "data:" + mime + ";base64," + base64.StdEncoding.EncodeToString(data)
}

// fitDimensions scales w×h to fit maxW×maxH keeping the aspect ratio, as
// the image crate's resize does (rounded, at least 1).
func fitDimensions(w, h, maxW, maxH int) (int, int) {
	ratio := math.Min(float64(maxW)/float64(w), float64(maxH)/float64(h))
	nw := max(int(math.Round(float64(w)*ratio)), 1)
	nh := max(int(math.Round(float64(h)*ratio)), 1)
	return nw, nh
}

// resize scales src down to w×h by averaging the source pixels each target
// pixel covers (a box filter; only downscaling happens here).
func resize(src image.Image, w, h int) image.Image {
	b := src.Bounds()
	in, ok := src.(*image.NRGBA)
	if !ok || in.Rect.Min != (image.Point{}) {
		in = image.NewNRGBA(image.Rect(0, 0, b.Dx(), b.Dy()))
		draw.Draw(in, in.Rect, src, b.Min, draw.Src)
	}
	sw, sh := in.Rect.Dx(), in.Rect.Dy()
	out := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		y0 := y * sh / h
		y1 := max((y+1)*sh/h, y0+1)
		for x := 0; x < w; x++ {
			x0 := x * sw / w
			x1 := max((x+1)*sw/w, x0+1)
			var r, g, bl, a, n uint64
			for sy := y0; sy < y1; sy++ {
				row := in.Pix[sy*in.Stride:]
				for sx := x0; sx < x1; sx++ {
					p := row[sx*4 : sx*4+4]
					// Weight colour by alpha so transparent pixels do not
					// darken the average.
					pa := uint64(p[3])
					r += uint64(p[0]) * pa
					g += uint64(p[1]) * pa
					bl += uint64(p[2]) * pa
					a += pa
					n++
				}
			}
			o := out.Pix[y*out.Stride+x*4:]
			if a > 0 {
				o[0], o[1], o[2] = uint8(r/a), uint8(g/a), uint8(bl/a)
			}
			o[3] = uint8(a / n)
		}
	}
	return out
}
