package harness

import (
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"math"
)

var (
	colKmirror = color.RGBA{0x1f, 0x77, 0xb4, 0xff}
	colPT      = color.RGBA{0x2c, 0xa0, 0x2c, 0xff}
	colMM2     = color.RGBA{0xff, 0x7f, 0x0e, 0xff}
	colLimit   = color.RGBA{0xa0, 0xa0, 0xa0, 0xff}
	colText    = color.RGBA{0x20, 0x20, 0x20, 0xff}
	colAxis    = color.RGBA{0x60, 0x60, 0x60, 0xff}
	colGrid    = color.RGBA{0xe4, 0xe4, 0xe4, 0xff}
)

// panel is one bar chart: a value per workload and series, with min–max
// whiskers.
type panel struct {
	title  string
	series []string // replicators, in bar order
	get    func(Summary) Stat
}

// Chart draws the medians of res as grouped bars with min–max whiskers:
// throughput, CPU per GB and peak RSS, one panel each.
func Chart(res *Results, w io.Writer) error {
	panels := []panel{
		{"THROUGHPUT, MB/S (HIGHER IS BETTER)", []string{Kmirror, KmirrorPT, MM2, Limit}, func(s Summary) Stat { return s.MBPerSec }},
		{"CPU SECONDS PER GB COPIED (LOWER IS BETTER)", []string{Kmirror, KmirrorPT, MM2}, func(s Summary) Stat { return s.CPUPerGB }},
		{"PEAK RSS, MIB (LOWER IS BETTER)", []string{Kmirror, KmirrorPT, MM2}, func(s Summary) Stat { return s.PeakRSSMiB }},
	}
	const (
		width  = 1200
		panelH = 300
		top    = 70
	)
	img := image.NewRGBA(image.Rect(0, 0, width, top+len(panels)*panelH+20))
	fill(img, img.Bounds(), color.White)
	title := "KMIRROR (RECORD PATH, PASSTHROUGH) VS APACHE MIRRORMAKER 2"
	if res.Meta.Quick {
		title += " (QUICK RUN, NOT REPRESENTATIVE)"
	}
	drawText(img, 20, 14, title, 3, colText)
	legend := []struct {
		name string
		c    color.Color
	}{{"kmirror", colKmirror}, {"kmirror-pt (passthrough)", colPT}, {"Apache MM2", colMM2}, {"limit: ProducerPerformance", colLimit}}
	x := 20
	for _, l := range legend {
		fill(img, image.Rect(x, 46, x+16, 60), l.c)
		drawText(img, x+22, 47, l.name, 2, colText)
		x += 22 + textWidth(l.name, 2) + 30
	}
	for i, p := range panels {
		drawPanel(img, res, p, image.Rect(0, top+i*panelH, width, top+(i+1)*panelH))
	}
	return png.Encode(w, img)
}

func drawPanel(img *image.RGBA, res *Results, p panel, r image.Rectangle) {
	const left, right, titleH, labelH = 80, 20, 30, 30
	drawText(img, r.Min.X+left, r.Min.Y+8, p.title, 2, colText)
	plot := image.Rect(r.Min.X+left, r.Min.Y+titleH+10, r.Max.X-right, r.Max.Y-labelH)
	wls := res.Meta.Workloads
	sums := map[string]map[string]Summary{}
	top := 0.0
	for _, w := range wls {
		sums[w] = map[string]Summary{}
		for _, s := range p.series {
			sm := Summarize(res, w, s)
			if s == Limit && sm.OK == 0 {
				if d, err := Lookup(w); err == nil && d.Data != "" {
					sm = Summarize(res, d.Data, Limit) // wan: the kb limit
				}
			}
			sums[w][s] = sm
			top = math.Max(top, p.get(sm).Max)
		}
	}
	if top <= 0 {
		top = 1
	}
	step := niceStep(top / 4)
	top = math.Ceil(top/step) * step
	y := func(v float64) int { return plot.Max.Y - int(v/top*float64(plot.Dy())) }
	for v := 0.0; v <= top+step/2; v += step {
		yy := y(v)
		fill(img, image.Rect(plot.Min.X, yy, plot.Max.X, yy+1), colGrid)
		lab := trim(v)
		drawText(img, plot.Min.X-8-textWidth(lab, 2), yy-7, lab, 2, colAxis)
	}
	fill(img, image.Rect(plot.Min.X, plot.Min.Y, plot.Min.X+1, plot.Max.Y), colAxis)
	fill(img, image.Rect(plot.Min.X, plot.Max.Y, plot.Max.X, plot.Max.Y+1), colAxis)

	groupW := plot.Dx() / max(1, len(wls))
	barW := min(60, (groupW-30)/len(p.series))
	for gi, w := range wls {
		gx := plot.Min.X + gi*groupW + (groupW-barW*len(p.series))/2
		for si, s := range p.series {
			sm := sums[w][s]
			st := p.get(sm)
			bx := gx + si*barW
			c := map[string]color.Color{Kmirror: colKmirror, KmirrorPT: colPT, MM2: colMM2, Limit: colLimit}[s]
			if sm.OK == 0 {
				continue
			}
			fill(img, image.Rect(bx+2, y(st.Med), bx+barW-2, plot.Max.Y), c)
			// min–max whisker
			cx := bx + barW/2
			fill(img, image.Rect(cx, y(st.Max), cx+2, y(st.Min)+1), colText)
			fill(img, image.Rect(cx-5, y(st.Max), cx+7, y(st.Max)+2), colText)
			fill(img, image.Rect(cx-5, y(st.Min), cx+7, y(st.Min)+2), colText)
			lab := trim(st.Med)
			drawText(img, cx+1-textWidth(lab, 1)/2, y(st.Max)-11, lab, 1, colText)
		}
		drawText(img, plot.Min.X+gi*groupW+(groupW-textWidth(w, 2))/2, plot.Max.Y+10, w, 2, colText)
	}
}

// niceStep rounds v up to 1, 2 or 5 times a power of ten.
func niceStep(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

func trim(v float64) string {
	switch {
	case v >= 100 || v == math.Trunc(v):
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}
