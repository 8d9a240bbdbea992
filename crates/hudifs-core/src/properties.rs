//! `java.util.Properties` text (the format of `hoodie.properties`): comments, `=`/`:`/space
//! separators, escapes, line continuations. Infallible: any bytes parse to some map.

use std::collections::BTreeMap;

/// Parse text in `java.util.Properties` format.
pub fn parse_properties(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    // Join logical lines: a line ending in an odd number of backslashes continues on the next,
    // whose leading white space is dropped.
    let mut logical: Vec<String> = Vec::new();
    let mut current: Option<String> = None;
    for raw in text.split(['\n', '\r']) {
        let line = match current.take() {
            Some(mut acc) => {
                acc.push_str(raw.trim_start_matches([' ', '\t', '\x0c']));
                acc
            }
            None => {
                let trimmed = raw.trim_start_matches([' ', '\t', '\x0c']);
                if trimmed.is_empty() || trimmed.starts_with('#') || trimmed.starts_with('!') {
                    continue;
                }
                trimmed.to_string()
            }
        };
        let trailing = line.chars().rev().take_while(|&c| c == '\\').count();
        if trailing % 2 == 1 {
            let mut l = line;
            l.pop();
            current = Some(l);
        } else {
            logical.push(line);
        }
    }
    if let Some(l) = current {
        logical.push(l);
    }
    for line in logical {
        let chars: Vec<char> = line.chars().collect();
        // The key ends at the first unescaped '=', ':' or white space.
        let mut i = 0;
        while i < chars.len() {
            match chars[i] {
                '\\' => i += 2,
                '=' | ':' | ' ' | '\t' | '\x0c' => break,
                _ => i += 1,
            }
        }
        let key_end = i.min(chars.len());
        // Skip white space, then at most one separator, then white space.
        let mut j = key_end;
        while j < chars.len() && matches!(chars[j], ' ' | '\t' | '\x0c') {
            j += 1;
        }
        if j < chars.len() && matches!(chars[j], '=' | ':') {
            j += 1;
        }
        while j < chars.len() && matches!(chars[j], ' ' | '\t' | '\x0c') {
            j += 1;
        }
        let key = unescape(&chars[..key_end]);
        let value = unescape(&chars[j.min(chars.len())..]);
        out.insert(key, value);
    }
    out
}

fn unescape(chars: &[char]) -> String {
    let mut out = String::with_capacity(chars.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c != '\\' {
            out.push(c);
            i += 1;
            continue;
        }
        i += 1;
        let Some(&e) = chars.get(i) else { break };
        i += 1;
        match e {
            't' => out.push('\t'),
            'n' => out.push('\n'),
            'r' => out.push('\r'),
            'f' => out.push('\x0c'),
            'u' => {
                let hex: String = chars.iter().skip(i).take(4).collect();
                match u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32) {
                    Some(ch) if hex.len() == 4 => {
                        out.push(ch);
                        i += 4;
                    }
                    _ => out.push('u'),
                }
            }
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_java_properties() {
        let text = "#Updated at 2024\n\
                    hoodie.table.name=t1\n\
                    hoodie.keygen.timebased.input.dateformat=yyyy-MM-dd'T'HH\\:mm\\:ss.SSSZ\n\
                    key\\ with\\ space : value\n\
                    multi = a,\\\n    b\n\
                    ! bang comment\n\
                    uni=\\u0041x\n\
                    empty=\n";
        let p = parse_properties(text);
        assert_eq!(p["hoodie.table.name"], "t1");
        assert_eq!(
            p["hoodie.keygen.timebased.input.dateformat"],
            "yyyy-MM-dd'T'HH:mm:ss.SSSZ"
        );
        assert_eq!(p["key with space"], "value");
        assert_eq!(p["multi"], "a,b");
        assert_eq!(p["uni"], "Ax");
        assert_eq!(p["empty"], "");
        assert_eq!(p.len(), 6);
    }
}
