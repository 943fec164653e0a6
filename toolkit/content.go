package toolkit

import "github.com/toolplane/toolplane/toolkit/spec"

// A tool returns rich content by returning a *spec.CallResult it built
// itself (declare it with Out = *spec.CallResult, or return one from a
// dynamic tool), with as many blocks as it likes:
//
//	return &spec.CallResult{Content: []spec.Content{
//		toolkit.Text("The chart of last week's sales:"),
//		toolkit.Image(png, "image/png"),
//	}}, nil
//
// Both transports pass every block on as it is.

// Text returns a text content block.
func Text(s string) spec.Content {
	return spec.Content{Type: spec.ContentText, Text: s}
}

// Image returns an image content block of the given media type, such as
// image/png.
func Image(data []byte, mimeType string) spec.Content {
	return spec.Content{Type: spec.ContentImage, Data: data, MIMEType: mimeType}
}

// Audio returns an audio content block of the given media type, such as
// audio/wav.
func Audio(data []byte, mimeType string) spec.Content {
	return spec.Content{Type: spec.ContentAudio, Data: data, MIMEType: mimeType}
}

// Resource returns an embedded resource content block: text (set blob to
// nil) or bytes (set text to "").
func Resource(uri, mimeType, text string, blob []byte) spec.Content {
	return spec.Content{Type: spec.ContentResource, Resource: &spec.ResourceContents{URI: uri, MIMEType: mimeType, Text: text, Blob: blob}}
}
