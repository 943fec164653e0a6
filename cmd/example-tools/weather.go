package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"unicode"
)

// WeatherRequest is get_weather's input.
type WeatherRequest struct {
	City string `json:"city" description:"City name in Chinese or English, for example 北京, 北京市, Beijing, 西安 or Xi'an"`
}

// Weather is a city's current weather. Temperatures are written in words
// because small models mangle the degree sign.
type Weather struct {
	City        string `json:"city" description:"The city's canonical name"`
	Condition   string `json:"condition"`
	Temperature string `json:"temperature" description:"For example: 25 degrees Celsius"`
	Humidity    string `json:"humidity" description:"Relative humidity, for example: 40 percent"`
	Wind        string `json:"wind"`
}

type cityWeather struct {
	name      string   // canonical, as returned
	aliases   []string // other spellings, compared after normalisation
	condition string
	celsius   int
	humidity  int
	wind      string
}

// weatherTable is deterministic on purpose: the demo and the tests must give
// the same answer every time, with no network.
var weatherTable = []cityWeather{
	{name: "北京", aliases: []string{"Beijing", "Peking"}, condition: "sunny", celsius: 25, humidity: 40, wind: "north wind, force 3"},
	{name: "上海", aliases: []string{"Shanghai"}, condition: "light rain", celsius: 22, humidity: 85, wind: "east wind, force 2"},
	{name: "西安", aliases: []string{"Xi'an", "Xian"}, condition: "cloudy", celsius: 18, humidity: 55, wind: "west wind, force 2"},
	{name: "广州", aliases: []string{"Guangzhou", "Canton"}, condition: "thunderstorms", celsius: 30, humidity: 90, wind: "south wind, force 4"},
	{name: "成都", aliases: []string{"Chengdu"}, condition: "overcast", celsius: 20, humidity: 75, wind: "calm"},
	{name: "哈尔滨", aliases: []string{"Harbin"}, condition: "snow", celsius: -12, humidity: 60, wind: "northwest wind, force 5"},
}

// ErrUnknownCity is returned by lookupWeather for a city not in the table.
type ErrUnknownCity struct{ City string }

func (e *ErrUnknownCity) Error() string {
	return fmt.Sprintf("unknown city %q; known cities: %s", e.City, strings.Join(knownCities(), ", "))
}

func knownCities() []string {
	names := make([]string, 0, len(weatherTable))
	for _, c := range weatherTable {
		names = append(names, fmt.Sprintf("%s (%s)", c.name, c.aliases[0]))
	}
	slices.Sort(names)
	return names
}

// normaliseCity folds the spellings a user or a model may send for one city
// into one key: surrounding space and case go, so do apostrophes, spaces and
// hyphens inside (Xi'an, Xi an, xi-an), and so does an administrative
// suffix, as in the seed (北京市 is 北京; "Beijing City" is Beijing).
func normaliseCity(s string) string {
	s = strings.TrimSpace(s)
	for _, suffix := range []string{"市", "城区"} {
		if t, ok := strings.CutSuffix(s, suffix); ok && t != "" {
			s = t
			break
		}
	}
	s = strings.ToLower(s)
	if t, ok := strings.CutSuffix(s, " city"); ok && t != "" {
		s = t
	}
	return strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) || r == '\'' || r == '’' || r == '-' {
			return -1
		}
		return r
	}, s)
}

var weatherIndex = func() map[string]*cityWeather {
	m := make(map[string]*cityWeather)
	for i := range weatherTable {
		c := &weatherTable[i]
		for _, n := range append([]string{c.name}, c.aliases...) {
			m[normaliseCity(n)] = c
		}
	}
	return m
}()

// lookupWeather returns the weather of a city, or *ErrUnknownCity.
func lookupWeather(city string) (Weather, error) {
	c, ok := weatherIndex[normaliseCity(city)]
	if !ok {
		return Weather{}, &ErrUnknownCity{City: city}
	}
	return Weather{
		City:        c.name,
		Condition:   c.condition,
		Temperature: celsiusWords(c.celsius),
		Humidity:    fmt.Sprintf("%d percent", c.humidity),
		Wind:        c.wind,
	}, nil
}

func celsiusWords(n int) string {
	switch {
	case n == 1:
		return "1 degree Celsius"
	case n < 0:
		return fmt.Sprintf("minus %d degrees Celsius", -n)
	default:
		return fmt.Sprintf("%d degrees Celsius", n)
	}
}

// getWeather is the get_weather tool.
func getWeather(_ context.Context, in WeatherRequest) (Weather, error) {
	return lookupWeather(in.City)
}
