package files

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/registry"
)

// itemLog records emitted items.
type itemLog struct {
	mu     sync.Mutex
	events []string
	items  []api.ThreadItem
}

func (l *itemLog) ItemStarted(item api.ThreadItem) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, "started")
	l.items = append(l.items, item)
}

func (l *itemLog) ItemCompleted(item api.ThreadItem) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, "completed")
	l.items = append(l.items, item)
}

// testImage draws a w×h gradient.
func testImage(w, h int) *image.NRGBA {
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			p := img.Pix[y*img.Stride+x*4:]
			p[0], p[1], p[2], p[3] = uint8(x), uint8(y), 200, 255
		}
	}
	return img
}

func encodePNG(t *testing.T, img image.Image) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// imageOf checks that out is one input_image item with a data URL of the
// given MIME type and decodes it.
func imageOf(t *testing.T, out registry.Output, mime string) ([]byte, image.Image) {
	t.Helper()
	if !out.Succeeded() || len(out.Content) != 1 || out.Content[0].Type != registry.ContentInputImage {
		t.Fatalf("output %+v", out)
	}
	prefix := "data:" + mime + ";base64,"
	url := out.Content[0].ImageURL
	if !strings.HasPrefix(url, prefix) {
		t.Fatalf("url %.60s… is not %s", url, prefix)
	}
	data, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(url, prefix))
	if err != nil {
		t.Fatal(err)
	}
	img, _, err := image.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	return data, img
}

func TestViewImageAttachesDataURL(t *testing.T) {
	log := &itemLog{}
	e := newEnv(t, &ViewImage{Items: log})
	pngBytes := encodePNG(t, testImage(3, 2))
	e.write(t, "shots/img.png", string(pngBytes))

	out := e.call(t, ViewImageName, map[string]any{"path": "shots/img.png"})
	data, _ := imageOf(t, out, "image/png")
	if !bytes.Equal(data, pngBytes) {
		t.Fatal("a small PNG is sent as is")
	}
	// The output item the next model request carries.
	item, err := json.Marshal(registry.ResponseItem{Type: registry.FunctionCallOutput, CallID: "call-1", Output: out})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"type":"function_call_output","call_id":"call-1","output":[{"type":"input_image","image_url":"data:image/png;base64,` + base64.StdEncoding.EncodeToString(pngBytes) + `"}]}`
	if string(item) != want {
		t.Fatalf("response item %s", item)
	}
	// The imageView item: started then completed, id = call id, absolute path.
	log.mu.Lock()
	defer log.mu.Unlock()
	if strings.Join(log.events, ",") != "started,completed" {
		t.Fatalf("events %v", log.events)
	}
	iv, ok := log.items[1].Body.(*api.ImageViewItem)
	if !ok || iv.ID != "call-1" || iv.Path != e.path("shots/img.png") || log.items[1].CompletedAtMs == nil || log.items[0].StartedAtMs == nil {
		t.Fatalf("item %+v", log.items[1])
	}
	raw, _ := json.Marshal(log.items[1])
	if !strings.Contains(string(raw), `"type":"imageView","id":"call-1","path":"`+e.path("shots/img.png")+`"`) {
		t.Fatalf("wire item %s", raw)
	}
}

func TestViewImageFormatsAndResize(t *testing.T) {
	e := newEnv(t, &ViewImage{})
	var jb bytes.Buffer
	if err := jpeg.Encode(&jb, testImage(10, 10), nil); err != nil {
		t.Fatal(err)
	}
	e.write(t, "photo.jpg", jb.String())
	data, _ := imageOf(t, e.call(t, ViewImageName, map[string]any{"path": e.path("photo.jpg")}), "image/jpeg")
	if !bytes.Equal(data, jb.Bytes()) {
		t.Fatal("a small JPEG is sent as is")
	}

	var gb bytes.Buffer
	pal := image.NewPaletted(image.Rect(0, 0, 4, 3), []color.Color{color.Black, color.White})
	if err := gif.Encode(&gb, pal, nil); err != nil {
		t.Fatal(err)
	}
	e.write(t, "anim.gif", gb.String())
	_, img := imageOf(t, e.call(t, ViewImageName, map[string]any{"path": "anim.gif"}), "image/png")
	if img.Bounds().Dx() != 4 || img.Bounds().Dy() != 3 {
		t.Fatalf("gif re-encoded as %v", img.Bounds())
	}

	// 2560x1024 fits 2048x768 at ratio 0.75: 1920x768.
	e.write(t, "big.png", string(encodePNG(t, testImage(2560, 1024))))
	_, img = imageOf(t, e.call(t, ViewImageName, map[string]any{"path": "big.png"}), "image/png")
	if img.Bounds().Dx() != 1920 || img.Bounds().Dy() != 768 {
		t.Fatalf("resized to %v", img.Bounds())
	}
	// Averaging keeps the picture: the blue channel is 200 everywhere.
	if _, _, b, _ := img.At(960, 400).RGBA(); b>>8 != 200 {
		t.Fatalf("resized pixel blue %d", b>>8)
	}
	if w, h := fitDimensions(3000, 100, MaxImageWidth, MaxImageHeight); w != 2048 || h != 68 {
		t.Fatalf("wide image fits as %dx%d", w, h)
	}
	var big bytes.Buffer
	if err := jpeg.Encode(&big, testImage(2100, 100), nil); err != nil {
		t.Fatal(err)
	}
	e.write(t, "wide.jpg", big.String())
	_, img = imageOf(t, e.call(t, ViewImageName, map[string]any{"path": "wide.jpg"}), "image/jpeg")
	if img.Bounds().Dx() != 2048 {
		t.Fatalf("wide jpeg resized to %v", img.Bounds())
	}
}

func TestViewImageErrors(t *testing.T) {
	log := &itemLog{}
	e := newEnv(t, &ViewImage{Items: log, MaxBytes: 4096, MaxPixels: 10_000})
	e.write(t, "notes.txt", "just text")
	if err := os.Mkdir(e.path("dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	e.write(t, "huge.png", strings.Repeat("x", 5000))
	e.write(t, "wide.png", string(encodePNG(t, image.NewGray(image.Rect(0, 0, 200, 100)))))
	cases := []struct {
		path, want string
	}{
		{"missing.png", "unable to locate image at `" + e.path("missing.png") + "`: No such file or directory (os error 2)"},
		{"dir", "image path `" + e.path("dir") + "` is not a file"},
		{"notes.txt", "unable to process image: the file is not a PNG, JPEG or GIF image, or it is damaged"},
		{"huge.png", "unable to process image at `" + e.path("huge.png") + "`: the file is 5000 bytes, more than the 4096-byte limit"},
		{"wide.png", "unable to process image at `" + e.path("wide.png") + "`: 200x100 pixels is more than the 10000-pixel limit"},
	}
	for _, c := range cases {
		wantErr(t, e.call(t, ViewImageName, map[string]any{"path": c.path}), c.want)
	}
	wantErr(t, e.call(t, ViewImageName, `{}`), "failed to parse function arguments: missing field `path`")
	if len(log.events) != 0 {
		t.Fatalf("failed calls emit no item: %v", log.events)
	}
}
