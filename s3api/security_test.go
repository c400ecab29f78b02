package s3api_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/archiveview/catalog"
	"github.com/wharf-s3/wharf/auth"
	"github.com/wharf-s3/wharf/s3api"
)

// smallWindowClient is an HTTP client whose connections have a 32 KiB
// receive buffer (which also turns off receive autotuning), so a response
// the client stops reading stalls the server's writes quickly.
func smallWindowClient() *http.Client {
	d := &net.Dialer{}
	return &http.Client{Transport: &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			if tc, ok := c.(*net.TCPConn); ok {
				if err := tc.SetReadBuffer(32 << 10); err != nil {
					c.Close()
					return nil, err
				}
			}
			return c, nil
		},
	}}
}

// TestConcurrencyLimitPerKey: with MaxInflightPerKey 2, two anonymous
// clients that stall in the middle of a large body hold both of their
// address's slots; a third request from that address is answered 503
// SlowDown at once (not queued), while a signed key keeps its own budget.
// When a stalled body is read to the end (and compared with the source), a
// slot frees again. Rejections are counted in wharf_requests_total{code=503}
// and wharf_throttled_requests_total.
func TestConcurrencyLimitPerKey(t *testing.T) {
	big := randBytes(11, 16<<20) // larger than any socket buffers in between
	files := map[string][]byte{"big.bin": big, "small.txt": []byte("small\n")}
	a, _ := openArchive(t, files, fixtureOpts{frameSize: 256 << 10})
	v, err := auth.New(auth.Config{Keys: []auth.Key{{AccessKey: testAK, SecretKey: testSK}}, Anonymous: true})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	srv := httptest.NewServer(s3api.New(s3api.Config{
		Catalog:  catalog.NewStatic(map[string]*archiveview.Archive{testBucket: a}),
		Verifier: v, Logger: zerolog.Nop(), Registerer: reg, MaxInflightPerKey: 2,
	}))
	t.Cleanup(srv.Close)

	// Two holders: headers and the first bytes arrive, then they stop
	// reading, mid-body.
	type holder struct {
		resp *http.Response
		head []byte
	}
	var holders []holder
	for i := 0; i < 2; i++ {
		resp, err := smallWindowClient().Get(srv.URL + "/bkt/big.bin")
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 200 {
			t.Fatalf("holder %d: status %d", i, resp.StatusCode)
		}
		head := make([]byte, 1000)
		if _, err := io.ReadFull(resp.Body, head); err != nil {
			t.Fatal(err)
		}
		holders = append(holders, holder{resp, head})
	}
	defer func() {
		for _, h := range holders {
			h.resp.Body.Close()
		}
	}()

	// The third request from the same address is refused at once.
	start := time.Now()
	resp, body := do(t, http.DefaultClient, "GET", srv.URL+"/bkt/small.txt")
	wantError(t, resp, body, 503, "SlowDown")
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the refusal took %v: queued instead of refused", d)
	}
	resp, body = do(t, http.DefaultClient, "HEAD", srv.URL+"/bkt/small.txt")
	wantError(t, resp, body, 503, "")
	resp, body = do(t, http.DefaultClient, "GET", srv.URL+"/")
	wantError(t, resp, body, 503, "SlowDown")

	// A signed key has its own budget, also for its own listing and reads.
	c := newSDKClient(t, srv.URL, testAK, testSK)
	out, err := c.GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String(testBucket), Key: aws.String("small.txt")})
	if err != nil {
		t.Fatalf("signed key refused while anonymous slots are full: %v", err)
	}
	got, err := io.ReadAll(out.Body)
	out.Body.Close()
	if err != nil || !bytes.Equal(got, files["small.txt"]) {
		t.Fatalf("signed GET small.txt: %q %v", got, err)
	}

	// Still held (nothing was released by the refusals).
	resp, body = do(t, http.DefaultClient, "GET", srv.URL+"/bkt/small.txt")
	wantError(t, resp, body, 503, "SlowDown")

	// Finish one stalled body: every byte equals the source.
	rest, err := io.ReadAll(holders[0].resp.Body)
	if err != nil || !bytes.Equal(append(holders[0].head, rest...), big) {
		t.Fatalf("stalled body after resuming: %v, %d bytes, equal %v", err, len(holders[0].head)+len(rest), bytes.Equal(append(holders[0].head, rest...), big))
	}
	holders[0].resp.Body.Close()

	// The handler returns just after the last byte left it: poll briefly.
	deadline := time.Now().Add(10 * time.Second)
	throttled := 4.0 // the refusals above
	for {
		resp, body = do(t, http.DefaultClient, "GET", srv.URL+"/bkt/small.txt")
		if resp.StatusCode == 200 {
			if !bytes.Equal(body, files["small.txt"]) {
				t.Fatalf("small.txt after a slot freed: %q", body)
			}
			break
		}
		wantError(t, resp, body, 503, "SlowDown")
		throttled++
		if time.Now().After(deadline) {
			t.Fatal("no slot freed after a body was fully read")
		}
		time.Sleep(20 * time.Millisecond)
	}

	// The second holder still holds its slot: with one free slot, two
	// concurrent requests cannot both get through while it is stalled —
	// prove it by holding the freed slot with a third staller.
	resp3, err := smallWindowClient().Get(srv.URL + "/bkt/big.bin")
	if err != nil || resp3.StatusCode != 200 {
		t.Fatalf("third holder: %v", err)
	}
	head3 := make([]byte, 1000)
	if _, err := io.ReadFull(resp3.Body, head3); err != nil {
		t.Fatal(err)
	}
	holders = append(holders, holder{resp3, head3})
	resp, body = do(t, http.DefaultClient, "GET", srv.URL+"/bkt/small.txt")
	wantError(t, resp, body, 503, "SlowDown")
	throttled++

	// Both remaining bodies complete with the right bytes.
	var wg sync.WaitGroup
	errs := make(chan string, 2)
	for _, h := range holders[1:] {
		wg.Add(1)
		go func(h holder) {
			defer wg.Done()
			rest, err := io.ReadAll(h.resp.Body)
			if err != nil || !bytes.Equal(append(h.head, rest...), big) {
				errs <- "a held body came back wrong"
			}
		}(h)
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}

	if got := metricValue(t, reg, "wharf_throttled_requests_total", nil); got != throttled {
		t.Errorf("wharf_throttled_requests_total = %v, want %v", got, throttled)
	}
	n503 := metricValue(t, reg, "wharf_requests_total", map[string]string{"op": "GetObject", "code": "503"}) +
		metricValue(t, reg, "wharf_requests_total", map[string]string{"op": "HeadObject", "code": "503"}) +
		metricValue(t, reg, "wharf_requests_total", map[string]string{"op": "ListBuckets", "code": "503"})
	if n503 != throttled {
		t.Errorf("wharf_requests_total{code=503} = %v, want %v", n503, throttled)
	}
}

// TestConcurrencyLimitUnlimited: MaxInflightPerKey 0 never refuses: 40
// concurrent 1 MiB GETs from one client all succeed with the source bytes.
func TestConcurrencyLimitUnlimited(t *testing.T) {
	data := randBytes(12, 1<<20)
	a, _ := openArchive(t, map[string][]byte{"f.bin": data}, fixtureOpts{})
	v, err := auth.New(auth.Config{Anonymous: true})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	srv := httptest.NewServer(s3api.New(s3api.Config{
		Catalog:  catalog.NewStatic(map[string]*archiveview.Archive{testBucket: a}),
		Verifier: v, Logger: zerolog.Nop(), Registerer: reg,
	}))
	t.Cleanup(srv.Close)
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[int]int{}
	for i := 0; i < 40; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := http.Get(srv.URL + "/bkt/f.bin")
			if err != nil {
				t.Error(err)
				return
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			mu.Lock()
			defer mu.Unlock()
			if err != nil || !bytes.Equal(b, data) {
				codes[-1]++
				return
			}
			codes[resp.StatusCode]++
		}()
	}
	wg.Wait()
	if codes[200] != 40 {
		t.Fatalf("unlimited: status counts %v", codes)
	}
	if got := metricValue(t, reg, "wharf_throttled_requests_total", nil); got != 0 {
		t.Errorf("wharf_throttled_requests_total = %v", got)
	}
}

// do sends one request without a body and returns the response and body.
func do(t *testing.T, c *http.Client, method, url string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: body: %v", method, url, err)
	}
	return resp, b
}
