package harness

import (
	"image"
	"image/color"
	"image/png"
	"io"
	"math"
)

// Line is one series of a LinePanel: y values at x values (same length).
type Line struct {
	Name string
	X, Y []float64
}

// LinePanel is one panel of a line chart, all lines on one y axis from 0.
type LinePanel struct {
	Title string
	Lines []Line
}

var lineColors = []color.RGBA{colKmirror, colMM2, colPT, {0xd6, 0x27, 0x28, 0xff}, {0x94, 0x67, 0xbd, 0xff}}

// LineChart draws panels one under the other, each with its lines, an x
// axis labelled xLabel and a legend of the lines' names; robustness/'s
// soak draws its samples with it, in the benchmark charts' style.
func LineChart(w io.Writer, title, xLabel string, panels []LinePanel) error {
	const (
		width  = 1200
		panelH = 240
		top    = 50
	)
	img := image.NewRGBA(image.Rect(0, 0, width, top+len(panels)*panelH+30))
	fill(img, img.Bounds(), color.White)
	drawText(img, 20, 14, title, 3, colText)
	for i, p := range panels {
		drawLinePanel(img, p, xLabel, image.Rect(0, top+i*panelH, width, top+(i+1)*panelH))
	}
	return png.Encode(w, img)
}

func drawLinePanel(img *image.RGBA, p LinePanel, xLabel string, r image.Rectangle) {
	const left, right, titleH, labelH = 90, 20, 30, 36
	drawText(img, r.Min.X+left, r.Min.Y+8, p.Title, 2, colText)
	lx := r.Min.X + left + textWidth(p.Title, 2) + 30
	for i, l := range p.Lines {
		c := lineColors[i%len(lineColors)]
		fill(img, image.Rect(lx, r.Min.Y+10, lx+16, r.Min.Y+22), c)
		drawText(img, lx+22, r.Min.Y+11, l.Name, 1, colText)
		lx += 22 + textWidth(l.Name, 1) + 20
	}
	plot := image.Rect(r.Min.X+left, r.Min.Y+titleH+10, r.Max.X-right, r.Max.Y-labelH)
	xmax, ymax := 0.0, 0.0
	for _, l := range p.Lines {
		for i := range l.X {
			xmax, ymax = math.Max(xmax, l.X[i]), math.Max(ymax, l.Y[i])
		}
	}
	if xmax <= 0 {
		xmax = 1
	}
	if ymax <= 0 {
		ymax = 1
	}
	ystep := niceStep(ymax / 4)
	ymax = math.Ceil(ymax/ystep) * ystep
	xstep := niceStep(xmax / 8)
	px := func(v float64) int { return plot.Min.X + int(v/xmax*float64(plot.Dx())) }
	py := func(v float64) int { return plot.Max.Y - int(v/ymax*float64(plot.Dy())) }
	for v := 0.0; v <= ymax+ystep/2; v += ystep {
		y := py(v)
		fill(img, image.Rect(plot.Min.X, y, plot.Max.X, y+1), colGrid)
		lab := trim(v)
		drawText(img, plot.Min.X-8-textWidth(lab, 2), y-7, lab, 2, colAxis)
	}
	for v := 0.0; v <= xmax+xstep/2; v += xstep {
		x := px(v)
		fill(img, image.Rect(x, plot.Max.Y, x+1, plot.Max.Y+5), colAxis)
		lab := trim(v)
		drawText(img, x-textWidth(lab, 1)/2, plot.Max.Y+8, lab, 1, colAxis)
	}
	drawText(img, plot.Max.X-textWidth(xLabel, 1), plot.Max.Y+22, xLabel, 1, colAxis)
	fill(img, image.Rect(plot.Min.X, plot.Min.Y, plot.Min.X+1, plot.Max.Y), colAxis)
	fill(img, image.Rect(plot.Min.X, plot.Max.Y, plot.Max.X, plot.Max.Y+1), colAxis)
	for i, l := range p.Lines {
		c := lineColors[i%len(lineColors)]
		for j := range l.X {
			x, y := px(l.X[j]), py(l.Y[j])
			fill(img, image.Rect(x-2, y-2, x+3, y+3), c)
			if j > 0 {
				drawSegment(img, px(l.X[j-1]), py(l.Y[j-1]), x, y, c)
			}
		}
	}
}

// drawSegment draws a 2-pixel line from (x0, y0) to (x1, y1).
func drawSegment(img *image.RGBA, x0, y0, x1, y1 int, c color.Color) {
	n := max(abs(x1-x0), abs(y1-y0), 1)
	for i := 0; i <= n; i++ {
		x := x0 + (x1-x0)*i/n
		y := y0 + (y1-y0)*i/n
		fill(img, image.Rect(x, y, x+2, y+2), c)
	}
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}
