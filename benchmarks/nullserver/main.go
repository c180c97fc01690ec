// Command nullserver answers the OpenAI routes the plugin's users send to with realistic, valid replies
// at almost no cost of its own, so that a benchmark against it measures the load generator.
//
//	nullserver -addr 127.0.0.1:8000 [-dims 1024] [-ttft 0s] [-itl 2ms] [-latency 0s]
//
// POST /v1/embeddings: one vector of -dims values per input, in the format the request asks for
// ("encoding_format": "base64" is little-endian float32 bytes in base64, as vLLM and TEI send it; "float",
// or none, is a JSON list of the shortest decimal form of each float32 widened to a float64, as Python's
// json.dumps writes a vLLM reply: about 20 characters a value). The values are unit-norm pseudo-random
// float32, the same for every request; each reply is built once per (inputs, format) and kept.
// POST /v1/chat/completions and /v1/completions: streamed (stream: true) as vLLM streams them: a role
// chunk (chat only), then exactly max_tokens chunks of one word each, -ttft before the first and -itl between
// the others, a finish chunk with finish_reason "length" and no text (chat: "delta":{}; completions: "text":""),
// a usage chunk ("choices":[]) where stream_options.include_usage asks for it, and "data: [DONE]"; unstreamed,
// one completion of max_tokens words. -latency delays an embedding or a transcription reply.
// POST /v1/audio/transcriptions: the body is read whole, then {"text": ...} after -latency.
// GET /health, /v1/models: 200.
package main

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"math"
	"math/rand"
	"net/http"
	"strconv"
	"sync"
	"time"
)

var (
	dims      = flag.Int("dims", 1024, "values per embedding vector")
	ttft      = flag.Duration("ttft", 0, "delay before a stream's first token")
	itl       = flag.Duration("itl", 2*time.Millisecond, "delay between two tokens of a stream")
	latency   = flag.Duration("latency", 0, "delay before an embedding or transcription reply")
	modelName = flag.String("model", "null", "the model name the replies carry")
)

type embeddingRequest struct {
	Input          json.RawMessage `json:"input"`
	EncodingFormat string          `json:"encoding_format"`
}

type completionRequest struct {
	MaxTokens     int  `json:"max_tokens"`
	Stream        bool `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

var (
	vector   []float32
	replies  sync.Map // "<n>/<format>" -> []byte
	floatTxt []byte   // one vector as a JSON list
	b64Txt   []byte   // one vector as a JSON string of base64
)

func buildVector() {
	rng := rand.New(rand.NewSource(1))
	vector = make([]float32, *dims)
	var norm float64
	for i := range vector {
		v := rng.NormFloat64()
		vector[i] = float32(v)
		norm += v * v
	}
	norm = math.Sqrt(norm)
	var list bytes.Buffer
	list.WriteByte('[')
	raw := make([]byte, 4*len(vector))
	for i := range vector {
		vector[i] = float32(float64(vector[i]) / norm)
		if i > 0 {
			list.WriteByte(',')
		}
		// Python's repr of float(numpy.float32): the shortest decimal of the widened float64
		list.WriteString(pyFloat(float64(vector[i])))
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(vector[i]))
	}
	list.WriteByte(']')
	floatTxt = list.Bytes()
	b64Txt = []byte(`"` + base64.StdEncoding.EncodeToString(raw) + `"`)
}

// pyFloat formats v as Python's repr does (shortest round-trip digits, exponent below 1e-4).
func pyFloat(v float64) string {
	if v != 0 && math.Abs(v) < 1e-4 {
		s := strconv.FormatFloat(v, 'e', -1, 64)
		return s
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// inputs is the number of inputs an embeddings request's "input" holds: a string or a list of token ids is
// one; a list of strings (or of token-id lists) one per element.
func inputs(raw json.RawMessage) int {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '[' {
		var items []json.RawMessage
		if json.Unmarshal(raw, &items) == nil {
			if len(items) > 0 {
				first := bytes.TrimSpace(items[0])
				if len(first) > 0 && (first[0] == '-' || (first[0] >= '0' && first[0] <= '9')) {
					return 1
				}
			}
			return len(items)
		}
	}
	return 1
}

func embeddingsReply(n int, format string) []byte {
	key := fmt.Sprintf("%d/%s", n, format)
	if cached, ok := replies.Load(key); ok {
		return cached.([]byte)
	}
	text := floatTxt
	if format == "base64" {
		text = b64Txt
	}
	var out bytes.Buffer
	out.WriteString(`{"id":"embd-null","object":"list","created":0,"model":"` + *modelName + `","data":[`)
	for i := 0; i < n; i++ {
		if i > 0 {
			out.WriteByte(',')
		}
		fmt.Fprintf(&out, `{"index":%d,"object":"embedding","embedding":`, i)
		out.Write(text)
		out.WriteByte('}')
	}
	fmt.Fprintf(&out, `],"usage":{"prompt_tokens":%d,"total_tokens":%d,"completion_tokens":0,"prompt_tokens_details":null}}`,
		64*n, 64*n)
	reply := out.Bytes()
	replies.Store(key, reply)
	return reply
}

func embeddings(w http.ResponseWriter, r *http.Request) {
	var req embeddingRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, `{"error":{"message":"body is not JSON"}}`, http.StatusBadRequest)
		return
	}
	if *latency > 0 {
		time.Sleep(*latency)
	}
	format := req.EncodingFormat
	if format != "base64" {
		format = "float"
	}
	reply := embeddingsReply(inputs(req.Input), format)
	w.Header().Set("Content-Type", "application/json")
	// with its length, as uvicorn (vLLM, SGLang) and axum (TEI) send a JSON reply; without it, Go chunks any
	// reply over 2 KB
	w.Header().Set("Content-Length", strconv.Itoa(len(reply)))
	w.Write(reply)
}

func chunk(w io.Writer, chat bool, content string, finish string, usage string) {
	finishJSON := "null"
	if finish != "" {
		finishJSON = `"` + finish + `"`
	}
	id, object := "chatcmpl-null", "chat.completion.chunk"
	if !chat {
		id, object = "cmpl-null", "text_completion"
	}
	var choice string
	switch {
	case usage != "":
		fmt.Fprintf(w, "data: {\"id\":\"%s\",\"object\":\"%s\",\"created\":0,\"model\":\"%s\",\"choices\":[],\"usage\":%s}\n\n", id, object, *modelName, usage)
		return
	case chat && finish != "":
		// vLLM's last chat chunk carries the finish reason and an empty delta, not an empty content
		choice = fmt.Sprintf(`{"index":0,"delta":{},"logprobs":null,"finish_reason":%s,"stop_reason":null}`, finishJSON)
	case chat:
		choice = fmt.Sprintf(`{"index":0,"delta":{"content":%q},"logprobs":null,"finish_reason":%s}`, content, finishJSON)
	default:
		choice = fmt.Sprintf(`{"index":0,"text":%q,"logprobs":null,"finish_reason":%s,"stop_reason":null}`, content, finishJSON)
	}
	fmt.Fprintf(w, "data: {\"id\":\"%s\",\"object\":\"%s\",\"created\":0,\"model\":\"%s\",\"choices\":[%s]}\n\n", id, object, *modelName, choice)
}

var words = []string{" the", " model", " answers", " with", " one", " word", " at", " a", " time"}

func completions(chat bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req completionRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, `{"error":{"message":"body is not JSON"}}`, http.StatusBadRequest)
			return
		}
		n := req.MaxTokens
		if n <= 0 {
			n = 16
		}
		usage := fmt.Sprintf(`{"prompt_tokens":16,"total_tokens":%d,"completion_tokens":%d}`, 16+n, n)
		if !req.Stream {
			var text bytes.Buffer
			for i := 0; i < n; i++ {
				text.WriteString(words[i%len(words)])
			}
			w.Header().Set("Content-Type", "application/json")
			if chat {
				fmt.Fprintf(w, `{"id":"chatcmpl-null","object":"chat.completion","created":0,"model":"%s","choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"length"}],"usage":%s}`, *modelName, text.String(), usage)
			} else {
				fmt.Fprintf(w, `{"id":"cmpl-null","object":"text_completion","created":0,"model":"%s","choices":[{"index":0,"text":%q,"finish_reason":"length"}],"usage":%s}`, *modelName, text.String(), usage)
			}
			return
		}
		flusher, _ := w.(http.Flusher)
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		if chat {
			fmt.Fprintf(w, "data: {\"id\":\"chatcmpl-null\",\"object\":\"chat.completion.chunk\",\"created\":0,\"model\":\"%s\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"logprobs\":null,\"finish_reason\":null}]}\n\n", *modelName)
		}
		if flusher != nil {
			flusher.Flush()
		}
		for i := 0; i < n; i++ {
			if i == 0 {
				time.Sleep(*ttft)
			} else if *itl > 0 {
				time.Sleep(*itl)
			}
			chunk(w, chat, words[i%len(words)], "", "")
			if flusher != nil {
				flusher.Flush()
			}
		}
		chunk(w, chat, "", "length", "")
		if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
			chunk(w, chat, "", "", usage)
		}
		io.WriteString(w, "data: [DONE]\n\n")
	}
}

func transcriptions(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	if *latency > 0 {
		time.Sleep(*latency)
	}
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, `{"text":"the quick brown fox jumps over the lazy dog","usage":{"type":"duration","seconds":3}}`)
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8000", "host:port to listen on")
	flag.Parse()
	buildVector()
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/embeddings", embeddings)
	mux.HandleFunc("POST /v1/chat/completions", completions(true))
	mux.HandleFunc("POST /v1/completions", completions(false))
	mux.HandleFunc("POST /v1/audio/transcriptions", transcriptions)
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"object":"list","data":[{"id":"%s","object":"model"}]}`, *modelName)
	})
	log.Printf("nullserver on %s (%d-value vectors, itl %s)", *addr, *dims, *itl)
	log.Fatal((&http.Server{Addr: *addr, Handler: mux}).ListenAndServe())
}
